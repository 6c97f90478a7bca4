"""What one ingest transaction writes: the rows of its events, their keys and their deliveries.

``plan_rows`` routes each new event to the tenant's live endpoints (a delivery per
subscribed endpoint, parked when the endpoint is away) and gives every row its id;
``Plan.statements`` turns the rows into the multi-row inserts of ``storage/ingest_sql``.
``webhooks.ingest.accept`` runs them in one transaction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable, Iterable, Sequence

from webhooks.event_types import wants
from webhooks.storage.ids import new_ids
from webhooks.storage.ingest_sql import (
    DELIVERY_FIELDS,
    POSTGRES,
    Dialect,
    delete_keys_sql,
    insert_deliveries_sql,
    insert_events_sql,
    insert_keys_sql,
)
from webhooks.storage.models import BaseModel, Delivery, Endpoint, Event
from webhooks.storage.statuses import PARKING_STATES


@dataclass(frozen=True)
class NewEvent:
    """One event as sent: its type, its payload and (optionally) its idempotency key."""

    event_type: str
    payload: dict[str, Any]
    key: str | None = None


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

#: Rows per INSERT statement at most (SQLite allows 32,766 parameters in one statement).
INSERT_CHUNK = 500

#: Multi-row inserts are prepared (PostgreSQL) for up to this many rows.
MAX_PREPARED_ROWS = 32

#: A live endpoint as routing needs it: id, subscribed types, disabled, health.
Route = tuple[str, list[str], Any, str]


def instance_of(model: type[BaseModel], data: dict[str, Any]) -> Any:
    """A model instance as if read from the database (no defaults, nothing dirty)."""
    row = model(__no_default__=True)
    row.__data__ = data
    return row


def routes_of(rows: Iterable[Sequence[Any]]) -> list[Route]:
    """Endpoint rows ``(id, event_types JSON, disabled, health)``, their types parsed once per batch."""
    return [(row[0], json.loads(row[1]), row[2], row[3]) for row in rows]


@dataclass
class Plan:
    """What a batch writes: its events, their keys and their deliveries, as rows."""

    events: list[dict[str, Any]]
    keys: list[list[Any]]
    deliveries: list[list[dict[str, Any]]]

    def statements(self, dialect: Dialect, tenant_id: str, expired: Sequence[str],
                   sql_for: Callable[[str, str], str] = lambda _name, sql: sql) -> list[tuple[str, list[Any]]]:
        """``(sql, params)`` of each statement; ``sql_for(name, sql)`` may swap in a prepared statement."""
        out: list[tuple[str, list[Any]]] = []
        if expired:
            out.append((delete_keys_sql(dialect, len(expired)), [tenant_id, *expired]))
        events = [[e["id"], e["tenant"], e["seq"], e["event_type"], _PAYLOAD.db_value(e["payload"]), e["created_at"]]
                  for e in self.events]
        deliveries = [[d[name] for name in DELIVERY_FIELDS] for group in self.deliveries for d in group]
        for rows, table, build in ((events, "events", insert_events_sql), (self.keys, "keys", insert_keys_sql),
                                   (deliveries, "deliveries", insert_deliveries_sql)):
            for start in range(0, len(rows), INSERT_CHUNK):
                chunk = rows[start:start + INSERT_CHUNK]
                out.append((sql_for(statement_name(table, len(chunk)), build(dialect, len(chunk))),
                            [value for row in chunk for value in row]))
        return out

    def shapes(self) -> list[tuple[str, str]]:
        """``(name, sql)`` of the small multi-row inserts this plan used: worth preparing for next time."""
        out = []
        for table, rows, build in (("events", len(self.events), insert_events_sql),
                                   ("keys", len(self.keys), insert_keys_sql),
                                   ("deliveries", sum(map(len, self.deliveries)), insert_deliveries_sql)):
            if 0 < rows <= MAX_PREPARED_ROWS:
                out.append((statement_name(table, rows), build(POSTGRES, rows)))
        return out

    def accepted(self) -> list[Accepted]:
        return [Accepted(instance_of(Event, event), [instance_of(Delivery, d) for d in deliveries], replayed=False)
                for event, deliveries in zip(self.events, self.deliveries)]


def plan_rows(tenant_id: str, first_seq: int, items: Sequence[NewEvent], digests: Sequence[str | None], now: datetime,
          routes: list[Route], exclude_endpoint: str | None) -> Plan:
    plan = Plan([], [], [])
    event_ids = new_ids("evt", len(items))
    delivery_ids = iter(new_ids("dlv", len(items) * len(routes)))
    for offset, (item, digest, event_id) in enumerate(zip(items, digests, event_ids)):
        plan.events.append({"id": event_id, "tenant": tenant_id, "seq": first_seq + offset,
                            "event_type": item.event_type, "payload": item.payload, "created_at": now})
        if item.key is not None:
            plan.keys.append([tenant_id, item.key, event_id, digest, now])
        deliveries = []
        for endpoint_id, event_types, disabled, health in routes:
            if endpoint_id == exclude_endpoint or not wants(event_types, item.event_type):
                continue
            parked = parks_as(disabled, health)
            deliveries.append({
                "id": next(delivery_ids), "tenant": tenant_id, "event": event_id, "endpoint": endpoint_id,
                "status": "parked" if parked else "pending", "attempts": 0,
                "next_attempt_at": None if parked else now, "created_at": now, "updated_at": now,
            })
        deliveries.sort(key=lambda d: d["id"])  # as a replay and GET /v1/events/<id> list them
        plan.deliveries.append(deliveries)
    return plan


def statement_name(table: str, rows: int) -> str:
    return f"ingest_{table}_{rows}"
