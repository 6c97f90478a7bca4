"""What one ingest transaction writes: the rows of its events, their keys and their deliveries.

``plan_rows`` routes each new event to the tenant's live endpoints (a delivery per
subscribed endpoint, parked when the endpoint is away, and then a fallback copy too when it
names a fallback: ``webhooks.ingest.fallback``) and gives every row its id; the
seqs come from the tenant row (``Plan.number``). ``Plan.statements`` turns the rows into
the multi-row inserts of ``storage/ingest_sql``, one table at a time, and
``Plan.write_statement`` into PostgreSQL's single statement that also takes the seqs.
``webhooks.ingest.accept`` runs either in one transaction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Sequence

from webhooks.catalog.filters import Filter, FilterIndex, compiled, event_view
from webhooks.ingest.fallback import new_copy, tells_fallback
from webhooks.event_types import wants
from webhooks.observability.tracing import current_traceparent
from webhooks.storage.ids import new_ids
from webhooks.storage.ingest_sql import (
    DELIVERY_FIELDS,
    EVENT_FIELDS,
    INSERT_CHUNK,
    Dialect,
    delete_keys_sql,
    insert_deliveries_sql,
    insert_events_sql,
    insert_keys_sql,
    postgres_write_sql,
)
from webhooks.storage.models import BaseModel, Delivery, Endpoint, Event
from webhooks.storage.payload_json import EncodedPayload
from webhooks.storage.statuses import DeliveryStatus, PARKING_STATES
from webhooks.storage.timeutil import isoformat


@dataclass(frozen=True)
class NewEvent:
    """One event as sent: its type, its payload and (optionally) its idempotency key.

    ``test_endpoint``: a test event (``send-example``) for that endpoint alone, whatever it
    subscribes to and filters on.
    """

    event_type: str
    payload: dict[str, Any]
    key: str | None = None
    test_endpoint: str | None = None


@dataclass
class Accepted:
    event: Event
    deliveries: list[Delivery]
    #: True when the key was seen before: the same event is returned, nothing created.
    replayed: bool


def parks(endpoint: Endpoint) -> bool:
    """New deliveries to a disabled, offline or recovering endpoint wait, parked, in order."""
    return parks_as(endpoint.disabled, endpoint.health)


def parks_as(disabled: Any, health: str) -> bool:
    """``parks`` of an endpoint row read as plain values."""
    return bool(disabled) or health in PARKING_STATES


_PAYLOAD = Event._meta.fields["payload"]

#: PostgreSQL's write of a single event is prepared when it makes up to this many deliveries.
MAX_PREPARED_DELIVERIES = 32

#: A live endpoint as routing needs it: id, subscribed types, disabled, health, compiled filter (or None),
#: whether it names a fallback.
Route = tuple[str, list[str], Any, str, Filter | None, bool]


def instance_of(model: type[BaseModel], data: dict[str, Any]) -> Any:
    """A model instance as if read from the database (no defaults, nothing dirty)."""
    row = model(__no_default__=True)
    row.__data__ = data
    return row


def routes_of(rows: Iterable[Sequence[Any]]) -> list[Route]:
    """Endpoint rows ``(id, event_types JSON, disabled, health, filter JSON, has fallback)``, their types parsed
    once per batch, their filters compiled once per process (``filters.compiled``)."""
    return [(row[0], json.loads(row[1]), row[2], row[3], compiled(row[4]), bool(row[5])) for row in rows]


@dataclass
class Plan:
    """What a batch writes: its events, their keys and their deliveries, as rows."""

    events: list[dict[str, Any]]
    keys: list[list[Any]]
    deliveries: list[list[dict[str, Any]]]

    def cost(self) -> int:
        """What the batch spends of the tenant's ingest rate limit: one token per event, or per
        delivery it makes when it makes more (a fan-out to many endpoints costs what it makes)."""
        return max(len(self.events), sum(len(group) for group in self.deliveries))

    def number(self, first_seq: int) -> None:
        """Give the events their seqs, consecutive from ``first_seq`` in list order."""
        for offset, event in enumerate(self.events):
            event["seq"] = first_seq + offset

    def statements(self, dialect: Dialect, tenant_id: str, expired: Sequence[str]) -> list[tuple[str, list[Any]]]:
        """``(sql, params)`` of each statement, one table at a time (the events numbered first)."""
        out: list[tuple[str, list[Any]]] = []
        if expired:
            out.append((delete_keys_sql(dialect, len(expired)), [tenant_id, *expired]))
        events = [[event[field] for field in EVENT_FIELDS] for event in self._event_rows()]
        for rows, build in ((events, insert_events_sql), (self.keys, insert_keys_sql),
                            (self._delivery_rows(), insert_deliveries_sql)):
            for start in range(0, len(rows), INSERT_CHUNK):
                chunk = rows[start:start + INSERT_CHUNK]
                out.append((build(dialect, len(chunk)), [value for row in chunk for value in row]))
        return out

    def write_statement(self, limited: bool, bump: list[Any]) -> tuple[str | None, str, list[Any]]:
        """PostgreSQL: the whole write as one statement (``ingest_sql.postgres_write_sql``):
        ``(name worth preparing it under, or None; sql; params)``. ``bump``: the bump's
        parameters. The events get their seqs from the statement's answer (``number``)."""
        deliveries = self._delivery_rows()
        name = (f"ingest_write_{int(limited)}{len(self.keys)}_{len(deliveries)}"
                if len(self.events) == 1 and len(deliveries) <= MAX_PREPARED_DELIVERIES else None)
        params = list(bump)
        for event in self._event_rows():
            params += [event[field] for field in EVENT_FIELDS if field != "seq"]
        params += [value for rows in (self.keys, deliveries) for row in rows for value in row]
        return name, postgres_write_sql(limited, len(self.events), len(self.keys), len(deliveries)), params

    def _event_rows(self) -> list[dict[str, Any]]:
        return [{**e, "payload": _PAYLOAD.db_value(e["payload"])} for e in self.events]

    def _delivery_rows(self) -> list[list[Any]]:
        return [[d[name] for name in DELIVERY_FIELDS] for group in self.deliveries for d in group]

    def accepted(self) -> list[Accepted]:
        return [Accepted(instance_of(Event, event), [instance_of(Delivery, d) for d in deliveries], replayed=False)
                for event, deliveries in zip(self.events, self.deliveries)]


def plan_rows(tenant_id: str, items: Sequence[NewEvent], digests: Sequence[str | None], now: datetime,
              routes: list[Route], exclude_endpoint: str | None) -> Plan:
    plan = Plan([], [], [])
    traceparent = current_traceparent()  # the request's span: its deliveries' attempts join its trace
    event_ids = new_ids("evt", len(items))
    time = isoformat(now)
    receivers: list[list[Route]] = []
    index = FilterIndex((route[0], route[4]) for route in routes if route[4] is not None)
    for item, digest, event_id in zip(items, digests, event_ids):
        plan.events.append({"id": event_id, "tenant": tenant_id, "seq": None,
                            "event_type": item.event_type, "payload": EncodedPayload(item.payload), "created_at": now,
                            "traceparent": traceparent, "test": item.test_endpoint is not None})
        if item.key is not None:
            plan.keys.append([tenant_id, item.key, event_id, digest, now])
        receivers.append(_receivers(routes, item, event_id, time, index, exclude_endpoint))
    # Ids for the deliveries made, not for every endpoint of every event (a filter that matches nothing costs none).
    copies = sum(1 for group in receivers for route in group if route[5] and tells_fallback(route[2], route[3]))
    delivery_ids = iter(new_ids("dlv", sum(len(group) for group in receivers) + copies))
    for event_id, group in zip(event_ids, receivers):
        deliveries = []
        for endpoint_id, _, disabled, health, _, has_fallback in group:
            parked = parks_as(disabled, health)
            deliveries.append({
                "id": next(delivery_ids), "tenant": tenant_id, "event": event_id, "endpoint": endpoint_id,
                "status": DeliveryStatus.PARKED if parked else DeliveryStatus.PENDING, "attempts": 0,
                "next_attempt_at": None if parked else now, "created_at": now, "updated_at": now, "fallback": False,
            })
            if has_fallback and tells_fallback(disabled, health):  # missed: told to the fallback meanwhile
                deliveries.append(new_copy(next(delivery_ids), tenant_id, event_id, endpoint_id, now))
        deliveries.sort(key=lambda d: d["id"])  # as a replay and GET /v1/events/<id> list them
        plan.deliveries.append(deliveries)
    return plan


def _receivers(routes: list[Route], item: NewEvent, event_id: str, time: str, index: FilterIndex,
               exclude_endpoint: str | None) -> list[Route]:
    """The endpoints that get a delivery of ``item``: those subscribed to its type whose filter, if any, it
    matches (no match, no delivery row); a test event's one endpoint, whatever it subscribes to or filters on."""
    if item.test_endpoint is not None:
        return [route for route in routes if route[0] == item.test_endpoint]
    event_type = item.event_type
    subscribed = [route for route in routes if route[0] != exclude_endpoint and wants(route[1], event_type)]
    if not index:
        return subscribed
    view = event_view(event_id, event_type, time, item.payload)
    candidates = index.candidates(view)  # only filters whose equality the event meets are run
    return [route for route in subscribed if route[4] is None or route[0] in candidates and route[4].matches(view)]
