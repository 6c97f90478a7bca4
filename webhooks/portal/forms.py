"""The portal's endpoint form: read as the API reads ``POST /v1/endpoints`` (its schema, its
messages), and the event types a tenant may pick from (those it has sent, with their counts)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from marshmallow import ValidationError
from peewee import fn
from werkzeug.datastructures import MultiDict

from webhooks.api.schemas import EndpointCreateSchema
from webhooks.pages.errors import FieldErrors
from webhooks.storage.models import Event

#: The form's fields, in the order it shows them (the error summary follows it).
FIELDS = ("url", "fallback_url", "description", "event_types", "rate_limit")

#: Event types offered as checkboxes, most sent first.
MAX_TYPES_OFFERED = 100

#: Seconds a tenant's event types and their counts are reused before they are counted again.
TYPES_FRESH_FOR = 30.0
#: Tenants whose counts one web process keeps at most (then it forgets them all).
MAX_TENANTS_CACHED = 10_000

#: tenant id -> (monotonic time until which it is fresh, the types with their counts)
_types_cache: dict[str, tuple[float, list[tuple[str, int]]]] = {}


#: How the form names each field in its errors.
LABELS = {"url": "URL", "fallback_url": "Fallback URL", "description": "Description", "event_types": "Event types", "rate_limit": "Rate limit"}


def _first_message(value: Any) -> str:
    """marshmallow's first message of one field (a list, or per list item a dict), as the API shows it."""
    while isinstance(value, (dict, list)):
        value = next(iter(value.values())) if isinstance(value, dict) else value[0]
    return str(value)


def read_endpoint(form: MultiDict[str, str]) -> tuple[dict[str, Any], FieldErrors]:
    """The endpoint's fields from the form, validated by the API's schema; the errors per field."""
    types = [*form.getlist("event_types"),
             *(part.strip() for part in form.get("other_event_types", "").split(",") if part.strip())]
    raw: dict[str, Any] = {
        "url": form.get("url", "").strip(),
        "fallback_url": form.get("fallback_url", "").strip() or None,
        "description": form.get("description", "").strip(),
        "event_types": list(dict.fromkeys(types)),
    }
    rate = form.get("rate_limit", "").strip()
    raw["rate_limit"] = None if not rate else int(rate) if rate.isdigit() else rate
    try:
        return EndpointCreateSchema().load(raw), FieldErrors()
    except ValidationError as error:
        messages = error.normalized_messages()
        assert isinstance(messages, Mapping)
        return raw, FieldErrors({name: f"{LABELS.get(name, name)}: {_first_message(value)}"
                                 for name, value in messages.items()})


def types_sent(tenant_id: str) -> list[tuple[str, int]]:
    """The event types the tenant has sent, with how many of each, most sent first (counted at most
    every ``TYPES_FRESH_FOR`` seconds per tenant and web process: a count over every event)."""
    now = time.monotonic()
    cached = _types_cache.get(tenant_id)
    if cached is not None and cached[0] > now:
        return cached[1]
    count = fn.COUNT(Event.id)
    query = (Event.select(Event.event_type, count).where(Event.tenant == tenant_id)
             .group_by(Event.event_type).order_by(count.desc(), Event.event_type).limit(MAX_TYPES_OFFERED))
    types = list(query.tuples())
    if len(_types_cache) >= MAX_TENANTS_CACHED:
        _types_cache.clear()
    _types_cache[tenant_id] = (now + TYPES_FRESH_FOR, types)
    return types
