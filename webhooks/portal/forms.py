"""The portal's endpoint form: read as the API reads ``POST /v1/endpoints`` (its schema, its
messages; the filter as JSON), and the event types a tenant may pick from: the catalog's, under
their groups and with their descriptions, then any other it has sent (each with how many were sent)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from marshmallow import ValidationError
from peewee import fn
from werkzeug.datastructures import MultiDict

from webhooks.api.endpoint_schemas import EndpointCreateSchema
from webhooks.catalog import reading, store
from webhooks.pages.errors import FieldErrors
from webhooks.storage.models import Event

#: The form's fields, in the order it shows them (the error summary follows it).
FIELDS = ("url", "fallback_url", "description", "event_types", "filter", "rate_limit")

#: Event types offered as checkboxes from the catalog (by name), and of those sent, most sent first.
MAX_TYPES_OFFERED = 100

#: The heading of the types sent that the catalog does not have.
SENT_NOT_IN_CATALOG = "Sent so far, not in the catalog"

#: Seconds a tenant's event types and their counts are reused before they are counted again.
TYPES_FRESH_FOR = 30.0
#: Tenants whose counts one web process keeps at most (then it forgets them all).
MAX_TENANTS_CACHED = 10_000

#: tenant id -> (monotonic time until which it is fresh, the types with their counts)
_types_cache: dict[str, tuple[float, list[tuple[str, int]]]] = {}


#: How the form names each field in its errors.
LABELS = {"url": "URL", "fallback_url": "Fallback URL", "description": "Description", "event_types": "Event types",
          "filter": "Filter", "rate_limit": "Rate limit"}


@dataclass(frozen=True)
class TypeChoice:
    """An event type offered on the form: its description and mark from the catalog, how many were sent."""

    name: str
    description: str = ""
    deprecated: bool = False
    sent: int | None = None


def read_json(text: str, label: str) -> tuple[Any, str | None]:
    """The JSON in a text field (None when it is empty), or the message saying why it is not JSON."""
    if not text.strip():
        return None, None
    try:
        return json.loads(text), None
    except ValueError as error:
        return None, f"{label}: not JSON ({error})"


def _message(name: str, value: Any) -> str:
    """A field's message as the form shows it: the filter's names the path that is wrong, as the API's 422 does."""
    if name == "filter" and isinstance(value, dict):
        path, messages = next(iter(value.items()))
        where = "" if path == "_filter" else f"{path}: "
        return f"{LABELS[name]}: {where}{_first_message(messages)}"
    return f"{LABELS.get(name, name)}: {_first_message(value)}"


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
    not_json = None
    if "filter" in form:  # a form without the field leaves the filter as it is
        raw["filter"], not_json = read_json(form["filter"], LABELS["filter"])
    try:
        values, errors = EndpointCreateSchema().load(raw), FieldErrors()
    except ValidationError as error:
        messages = error.normalized_messages()
        assert isinstance(messages, Mapping)
        values, errors = raw, FieldErrors({name: _message(name, value) for name, value in messages.items()})
    if not_json:
        errors["filter"] = not_json
    return values, errors


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


def catalog_entries() -> list[store.Entry]:
    """The catalog's types as the portal offers them (not archived; the first ``MAX_TYPES_OFFERED`` by name)."""
    return list(store.page(limit=MAX_TYPES_OFFERED)["data"])


def type_choices(tenant_id: str) -> list[tuple[str, list[TypeChoice]]]:
    """The types to pick from, under headings: the catalog's groups (deprecated types marked), then
    those the tenant has sent that the catalog does not have."""
    sent = dict(types_sent(tenant_id))
    entries = catalog_entries()
    choices = [(group, [TypeChoice(entry.name, entry.description, entry.deprecated, sent.get(entry.name))
                        for entry in members]) for group, members in reading.by_group(entries)]
    listed = {entry.name for entry in entries}
    others = [TypeChoice(name, sent=count) for name, count in sent.items() if name not in listed]
    return choices + ([(SENT_NOT_IN_CATALOG, others)] if others else [])
