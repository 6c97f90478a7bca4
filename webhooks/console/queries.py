"""Finding deliveries: the search box, the list filters (shared with bulk replay) and paging."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from itertools import groupby
from datetime import datetime
from typing import Any

import peewee

from webhooks.errors import InvalidInput
from webhooks.console.formatting import parse_when
from webhooks.ingest.auth_keys import find_tenant
from webhooks.storage.ids import has_prefix
from webhooks.storage.size_budget import ATTEMPT_CHARS, MAX_ATTEMPT_PAGE_CHARS, keys_within
from webhooks.storage.models import Attempt, Delivery, Endpoint, Event, Tenant
from webhooks.storage.statuses import DELIVERY_STATUSES, UNFINISHED_STATUSES
from webhooks.storage.timeutil import isoformat, utcnow

#: Rows per page of every list.
PAGE_SIZE = 50

#: Every delivery status, in the order the console lists them.
STATUSES = DELIVERY_STATUSES

#: Deliveries that are still owed an attempt.
UNDELIVERED = UNFINISHED_STATUSES


class FilterError(InvalidInput):
    """A filter value that cannot be used; ``field`` names the form field."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(message)
        self.field = field_name


@dataclass(frozen=True)
class DeliveryFilter:
    """What a list of deliveries is narrowed to; empty fields do not narrow."""

    #: Free text: part of an endpoint URL, of a tenant name, or the start of an id.
    text: str = ""
    tenant_ids: tuple[str, ...] = ()
    endpoint_id: str | None = None
    event_type: str | None = None
    statuses: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    #: The tenant as the person typed it (id or name), to show it back in the form.
    tenant_text: str = field(default="", compare=False)

    def query(self) -> peewee.ModelSelect:
        """Deliveries matching the filter, with their event, endpoint and tenant joined."""
        query = (
            Delivery.select(Delivery, Event, Endpoint, Tenant)
            .join(Event).switch(Delivery)
            .join(Endpoint).switch(Delivery)
            .join(Tenant)
        )
        if self.text:
            query = query.where(
                Endpoint.url.contains(self.text)
                | Tenant.name.contains(self.text)
                | Event.id.startswith(self.text)
                | Delivery.id.startswith(self.text)
            )
        if self.tenant_ids:
            query = query.where(Delivery.tenant.in_(self.tenant_ids))
        if self.endpoint_id:
            query = query.where(Delivery.endpoint == self.endpoint_id)
        if self.event_type:
            query = query.where(Event.event_type == self.event_type)
        if self.statuses:
            query = query.where(Delivery.status.in_(self.statuses))
        if self.since:
            query = query.where(Delivery.created_at >= self.since)
        if self.until:
            query = query.where(Delivery.created_at < self.until)
        return query

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe copy (stored with a replay job)."""
        data = asdict(self)
        data.update(since=isoformat(self.since), until=isoformat(self.until))
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DeliveryFilter:
        def when(key: str) -> datetime | None:
            return parse_when(data[key], utcnow()) if data.get(key) else None

        return cls(
            **{**data, "tenant_ids": tuple(data.get("tenant_ids", ())), "statuses": tuple(data.get("statuses", ())),
               "since": when("since"), "until": when("until")}
        )

    @classmethod
    def from_args(cls, args: Mapping[str, str], now: datetime, **fixed: Any) -> DeliveryFilter:
        """Read ``q, tenant, endpoint_id, event_type, status, since, until`` from a query string."""
        tenant_text = args.get("tenant", "").strip()
        status = args.get("status", "").strip()
        if status and status not in STATUSES:
            raise FilterError("status", f"unknown status {status!r}")
        found = cls(
            text=args.get("q", "").strip(),
            tenant_ids=tenant_ids(tenant_text) if tenant_text else (),
            tenant_text=tenant_text,
            endpoint_id=args.get("endpoint_id", "").strip() or None,
            event_type=args.get("event_type", "").strip() or None,
            statuses=(status,) if status else (),
            since=_when(args, "since", now),
            until=_when(args, "until", now),
        )
        return replace(found, **fixed)

    def args(self) -> dict[str, str]:
        """The query string that gives this filter back (for links and the pager)."""
        values = {
            "q": self.text,
            "tenant": self.tenant_text or ",".join(self.tenant_ids),
            "endpoint_id": self.endpoint_id or "",
            "event_type": self.event_type or "",
            "status": self.statuses[0] if len(self.statuses) == 1 else "",
            "since": isoformat(self.since) or "",
            "until": isoformat(self.until) or "",
        }
        return {key: value for key, value in values.items() if value}


    def describe(self) -> str:
        """``tenant acme, event type order.created, since 2026-11-22T10:00:00.000Z`` (or ``everything``)."""
        names = {"q": "matching", "endpoint_id": "endpoint", "event_type": "event type", "since": "created since", "until": "created before"}
        return ", ".join(f"{names.get(key, key)} {value}" for key, value in self.args().items()) or "everything"


def _when(args: Mapping[str, str], name: str, now: datetime) -> datetime | None:
    text = args.get(name, "").strip()
    if not text:
        return None
    try:
        return parse_when(text, now)
    except ValueError as error:
        raise FilterError(name, str(error)) from None


def tenant_ids(text: str) -> tuple[str, ...]:
    """The tenant with the id or name ``text`` (``find_tenant``), as a filter; FilterError if none."""
    tenant = find_tenant(text)
    if tenant is None:
        raise FilterError("tenant", f"no tenant with the id or name {text.strip()!r}")
    return (tenant.id,)


@dataclass
class Page:
    """One page of rows, newest first, and the cursor of the next (older) page."""

    rows: list[Any]
    next_before: str | None


#: The largest id of the console's own tables (``AutoField``: a 32-bit integer on PostgreSQL).
MAX_ROW_ID = 2**31 - 1


def row_id_cursor(text: str | None) -> int | None:
    """A ``before`` cursor over an integer id, or None for anything that is not one (``²``, ``10**30``)."""
    if not text or not text.isascii() or not text.isdigit():
        return None
    number = int(text)
    return number if number <= MAX_ROW_ID + 1 else None


def page(query: peewee.ModelSelect[Any], key: peewee.Field, before: Any, size: int = PAGE_SIZE) -> Page:
    """Keyset paging on a unique, time-ordered id column (ids sort by creation time)."""
    if before:
        query = query.where(key < before)
    rows = list(query.order_by(key.desc()).limit(size + 1))
    more = len(rows) > size
    rows = rows[:size]
    return Page(rows, getattr(rows[-1], key.name) if more else None)


def exact_target(text: str) -> tuple[str, str] | None:
    """``("event" | "delivery" | "endpoint", id)`` when ``text`` is the id of an existing object."""
    text = text.strip()
    for model, prefix, kind in ((Event, "evt", "event"), (Delivery, "dlv", "delivery"), (Endpoint, "ep", "endpoint")):
        if has_prefix(text, prefix) and model.select().where(model.id == text).exists():
            return kind, text
    return None


def matching_endpoints(text: str, limit: int = 10) -> list[Endpoint]:
    """Endpoints whose URL contains ``text`` (newest first)."""
    query = Endpoint.select(Endpoint, Tenant).join(Tenant).where(Endpoint.url.contains(text))
    return list(query.order_by(Endpoint.id.desc()).limit(limit))


def matching_tenants(text: str, limit: int = 10) -> list[Tenant]:
    """Live tenants whose name contains ``text`` (or whose id or uid it is); a deleted one is gone
    from the console as from the API (the clock purges its rows)."""
    query = Tenant.select().where(Tenant.deleted_at.is_null()
                                  & (Tenant.name.contains(text) | (Tenant.id == text) | (Tenant.uid == text)))
    return list(query.order_by(Tenant.name).limit(limit))


def event_timelines(event_id: str, max_attempts: int) -> tuple[list[Delivery], dict[str, list[Attempt]], int]:
    """An event's deliveries (with their endpoints), each one's attempts, oldest first, at most
    ``max_attempts`` each, and how many attempts were left out because the page holds at most
    ``MAX_ATTEMPT_PAGE_CHARS`` of them (the event pages of the console and the portal)."""
    deliveries = list(
        Delivery.select(Delivery, Endpoint).join(Endpoint).where(Delivery.event == event_id).order_by(Delivery.id)
    )
    order = (Attempt.delivery, Attempt.attempt_no)
    # Sizes first, then only the attempts that fit (rows stored before the headers' cap may hold 961 KB).
    sized = list(Attempt.select(Attempt.id, ATTEMPT_CHARS).where(Attempt.event == event_id).order_by(*order).tuples())
    shown = keys_within(sized, len(sized), MAX_ATTEMPT_PAGE_CHARS)
    attempts = Attempt.select().where(Attempt.id.in_(shown)).order_by(*order) if shown else []
    timelines = {delivery_id: list(rows)[:max_attempts] for delivery_id, rows in groupby(attempts, lambda a: a.delivery_id)}
    return deliveries, timelines, len(sized) - len(shown)
