"""Accepting an event: one transaction (event, seq, deliveries, idempotency key), then publish.

The per-tenant ``seq`` is bumped with ``UPDATE … RETURNING`` inside the transaction, so
the tenant row is locked until commit and ``seq`` order is commit order: a reader of
``after=n`` can never miss a smaller seq committed later. The same statement spends a
token of the tenant's ingest rate limit (a bucket on the tenant row, refilled in SQL from
the time since its last use), so checking and spending are one atomic step under that
lock; a refusal rolls everything back and nothing is written.

This is the hot path of ``POST /v1/events``, so on PostgreSQL the transaction is two
round trips with precomputed SQL (no ORM query building):

1. ``BEGIN; WITH bumped AS (UPDATE tenant … RETURNING …) SELECT … FROM bumped LEFT JOIN
   endpoint …``: seq, the bucket's remaining tokens, whether the idempotency key was
   seen, and the tenant's live endpoints, all at once;
2. ``INSERT event; INSERT idempotency_key; INSERT delivery (one multi-row insert); COMMIT``.

Each connection prepares these statements once (server-side ``PREPARE``, outside any
transaction), so PostgreSQL does not plan them again for every event.

The 202 is only sent once that ``COMMIT`` has returned (``synchronous_commit`` is left on).
On SQLite, or when the caller already has a transaction open (operational events), the
same statements run one at a time inside ``write()``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable, Iterable, Sequence

import peewee
from flask import current_app

from webhooks import metrics, presence
from webhooks.db import database, is_postgres, retrying, rollback_quietly, write
from webhooks.event_types import OPERATIONAL_EVENT_TYPES, wants
from webhooks.ids import new_id
from webhooks.ingest_sql import (
    DELIVERY_FIELDS,
    POSTGRES,
    SQLITE,
    Dialect,
    bump_params,
    bump_sql,
    endpoints_sql,
    insert_deliveries_sql,
    insert_event_sql,
    insert_key_sql,
    postgres_start_sql,
)
from webhooks.models import BaseModel, Delivery, Endpoint, Event, IdempotencyKey, Tenant
from webhooks.outbox import enqueue, message_for
from webhooks.pg_prepared import INVALID_STATEMENT_NAME, PreparedStatements, pgcode
from webhooks.publisher import Publisher
from webhooks.timeutil import utcnow
from webhooks.topology import Topology

log = logging.getLogger(__name__)

#: How long an idempotency key is remembered.
IDEMPOTENCY_TTL = timedelta(hours=24)


class IdempotencyConflict(Exception):
    """The idempotency key was used before with a different request."""


class ReservedEventType(ValueError):
    """Operational event types are raised by the service only."""


class RateLimited(Exception):
    """The tenant sends events faster than ``INGEST_RATE_LIMIT``; nothing was written."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"too many events: at most the tenant's rate limit per second; retry in {retry_after:.2f}s")
        self.retry_after = retry_after


class UnknownTenant(LookupError):
    """The tenant row is gone (deleted while its key was still cached)."""


@dataclass
class Accepted:
    event: Event
    deliveries: list[Delivery]
    #: True when the key was seen before: the same event is returned, nothing created.
    replayed: bool


def request_hash(event_type: str, payload: dict[str, Any]) -> str:
    """Fingerprint of a request, to tell a retry from a different request with the same key."""
    canonical = json.dumps({"event_type": event_type, "payload": payload}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _replay(tenant: Tenant, key: str, digest: str) -> Accepted | None:
    row = (
        IdempotencyKey.select()
        .where((IdempotencyKey.tenant == tenant.id) & (IdempotencyKey.key == key))
        .first()
    )
    if row is None:
        return None
    if row.created_at < utcnow() - IDEMPOTENCY_TTL:
        row.delete_instance()  # expired: the key may be used afresh
        return None
    if row.request_hash != digest:
        raise IdempotencyConflict(f"idempotency key {key!r} was already used with a different request")
    event = Event.get_by_id(row.event_id)
    deliveries = list(Delivery.select().where(Delivery.event == event).order_by(Delivery.id))
    return Accepted(event, deliveries, replayed=True)


def parks(endpoint: Endpoint) -> bool:
    """New deliveries to a disabled, offline or recovering endpoint wait, parked, in order."""
    return _parks(endpoint.disabled, endpoint.health)


def _parks(disabled: Any, health: str) -> bool:
    return bool(disabled) or health in presence.PARKING_STATES


# --- building rows -------------------------------------------------------------------------

_PAYLOAD = Event._meta.fields["payload"]


def _instance(model: type[BaseModel], data: dict[str, Any]) -> Any:
    """A model instance as if read from the database (no defaults, nothing dirty)."""
    row = model(__no_default__=True)
    row.__data__ = data
    return row


@dataclass
class _Plan:
    """What one event writes: its row, its key's row and its deliveries' rows."""

    event: dict[str, Any]
    deliveries: list[dict[str, Any]]
    key: str | None
    digest: str | None

    def statements(self, dialect: Dialect, sql_for: Callable[[str, str], str] = lambda _name, sql: sql,
                   ) -> list[tuple[str, list[Any]]]:
        """``(sql, params)`` of each insert; ``sql_for(name, sql)`` may swap in a prepared statement."""
        event = self.event
        out = [(sql_for("ingest_event", insert_event_sql(dialect)),
                [event["id"], event["tenant"], event["seq"], event["event_type"],
                 _PAYLOAD.db_value(event["payload"]), event["created_at"]])]
        if self.key is not None:
            out.append((sql_for("ingest_key", insert_key_sql(dialect)),
                        [event["tenant"], self.key, event["id"], self.digest, event["created_at"]]))
        if self.deliveries:
            params: list[Any] = []
            for d in self.deliveries:
                params += [d[name] for name in DELIVERY_FIELDS]
            count = len(self.deliveries)
            out.append((sql_for(deliveries_statement(count), insert_deliveries_sql(dialect, count)), params))
        return out

    def accepted(self) -> Accepted:
        return Accepted(_instance(Event, self.event), [_instance(Delivery, d) for d in self.deliveries], replayed=False)


def _plan(tenant_id: str, seq: int, event_type: str, payload: dict[str, Any], now: datetime,
          endpoints: Iterable[tuple[str, str, Any, str]], key: str | None, digest: str | None,
          exclude_endpoint: str | None) -> _Plan:
    event_id = new_id("evt")
    event = {"id": event_id, "tenant": tenant_id, "seq": seq, "event_type": event_type, "payload": payload,
             "created_at": now}
    deliveries = []
    for endpoint_id, event_types, disabled, health in endpoints:
        if endpoint_id == exclude_endpoint or not wants(json.loads(event_types), event_type):
            continue
        parked = _parks(disabled, health)
        deliveries.append({
            "id": new_id("dlv"), "tenant": tenant_id, "event": event_id, "endpoint": endpoint_id,
            "status": "parked" if parked else "pending", "attempts": 0,
            "next_attempt_at": None if parked else now, "created_at": now, "updated_at": now,
        })
    deliveries.sort(key=lambda d: d["id"])  # as a replay and GET /v1/events/<id> list them
    return _Plan(event, deliveries, key, digest)


def _check_bucket(row: Sequence[Any] | None, rate_limit: float | None) -> int:
    """The new seq, or RateLimited when the bump found no token left."""
    if row is None:
        raise UnknownTenant("tenant not found")
    seq, tokens = row[0], row[1]
    if rate_limit is not None and tokens < 0:
        # ``tokens`` is what was left minus the one this event would have spent.
        raise RateLimited(-tokens / rate_limit)
    return int(seq)


# --- storing -------------------------------------------------------------------------------


#: Multi-row delivery inserts are prepared for up to this many endpoints per event.
MAX_PREPARED_DELIVERIES = 32


def deliveries_statement(count: int) -> str:
    return f"ingest_deliveries_{count}"


#: Which statements each connection has prepared (``PG_PREPARED_STATEMENTS``).
prepared = PreparedStatements()


class _StatementMissing(Exception):
    """A prepared statement this connection should have had is gone; rolled back, try again."""


class _KeySeen(Exception):
    """PostgreSQL fast path: the idempotency key is on file; rolled back, go replay it."""


def _store_postgres(tenant_id: str, event_type: str, payload: dict[str, Any], key: str | None,
                    digest: str | None, exclude_endpoint: str | None, rate_limit: float | None) -> Accepted:
    """Two round trips, explicit ``BEGIN``/``COMMIT`` (peewee is told to keep out of it)."""
    now = utcnow()
    params = bump_params(POSTGRES, tenant_id, rate_limit, now)
    if key is not None:
        params += [tenant_id, key]
    params.append(tenant_id)
    database.connect(reuse_if_open=True)  # before manual_commit(): connecting resets peewee's transaction stack
    start_name = f"ingest_start_{int(rate_limit is not None)}{int(key is not None)}"
    start = postgres_start_sql(rate_limit is not None, key is not None)
    prepared.prepare(start_name, start)  # once per connection, before BEGIN
    prepared.prepare("ingest_event", insert_event_sql(POSTGRES))
    if key is not None:
        prepared.prepare("ingest_key", insert_key_sql(POSTGRES))
    with database.manual_commit():
        committed = False
        try:
            try:
                rows = database.execute_sql("BEGIN; " + prepared.sql_for(start_name, start), params).fetchall()
                seq = _check_bucket(rows[0] if rows else None, rate_limit)
                if rows[0][2]:
                    raise _KeySeen()
                endpoints = [row[3:] for row in rows if row[3] is not None]
                plan = _plan(tenant_id, seq, event_type, payload, now, endpoints, key, digest, exclude_endpoint)
                statements = plan.statements(POSTGRES, prepared.sql_for)
                sql = "; ".join(statement for statement, _ in statements) + "; COMMIT"
                database.execute_sql(sql, [value for _, values in statements for value in values])
                committed = True
            except peewee.DatabaseError as error:
                if pgcode(error) != INVALID_STATEMENT_NAME:
                    raise
                prepared.forget()
                raise _StatementMissing() from error
        finally:
            if not committed:
                rollback_quietly()
    count = len(plan.deliveries)
    if 0 < count <= MAX_PREPARED_DELIVERIES:  # for the next event, now that the transaction is over
        try:
            prepared.prepare(deliveries_statement(count), insert_deliveries_sql(POSTGRES, count))
        except Exception:  # noqa: BLE001 - the event is committed: never fail (or retry) it now
            log.debug("preparing the insert of %d deliveries failed", count, exc_info=True)
    return plan.accepted()


def _store_generic(tenant_id: str, event_type: str, payload: dict[str, Any], key: str | None,
                   digest: str | None, exclude_endpoint: str | None, rate_limit: float | None) -> Accepted:
    """The same statements one by one, inside ``write()`` (SQLite, or an enclosing transaction)."""
    dialect = POSTGRES if is_postgres() else SQLITE
    now = utcnow()
    bump = bump_sql(dialect, rate_limit is not None)
    cursor = database.execute_sql(bump, bump_params(dialect, tenant_id, rate_limit, now))
    seq = _check_bucket(cursor.fetchone(), rate_limit)
    endpoints = database.execute_sql(endpoints_sql(dialect), [tenant_id]).fetchall()
    plan = _plan(tenant_id, seq, event_type, payload, now, endpoints, key, digest, exclude_endpoint)
    for statement, values in plan.statements(dialect):
        database.execute_sql(statement, values)
    return plan.accepted()


@retrying
def store_event(
    tenant: Tenant,
    event_type: str,
    payload: dict[str, Any],
    key: str | None,
    *,
    exclude_endpoint: str | None = None,
    rate_limit: float | None = None,
) -> Accepted:
    """Write the event and its deliveries in one transaction (or return the key's earlier event).

    ``exclude_endpoint``: an operational event is not sent to the endpoint it is about.
    ``rate_limit``: events per second this tenant may send (None: unlimited).
    """
    digest = None if key is None else request_hash(event_type, payload)
    args = (tenant.id, event_type, payload, key, digest, exclude_endpoint, rate_limit)
    try:
        if is_postgres() and not database.in_transaction():
            for _ in range(3):
                try:
                    return _store_postgres(*args)
                except _StatementMissing:
                    continue  # prepared again on the next try
                except _KeySeen:
                    with write():
                        earlier = _replay(tenant, key, digest)  # type: ignore[arg-type]
                    if earlier is not None:
                        return earlier
                    # The key had expired and is deleted now: store afresh.
            raise RuntimeError(f"could not store the event (idempotency key {key!r} or prepared statements)")
        with write():
            if key is not None:
                earlier = _replay(tenant, key, digest)  # type: ignore[arg-type]
                if earlier is not None:
                    return earlier
            return _store_generic(*args)
    except peewee.IntegrityError:
        # Lost a race for the same idempotency key: the winner has committed; return it.
        if key is None:
            raise
        with write():
            winner = _replay(tenant, key, digest)  # type: ignore[arg-type]
        if winner is None:
            raise
        return winner


def accept_event(
    tenant: Tenant,
    event_type: str,
    payload: dict[str, Any],
    idempotency_key: str | None = None,
    *,
    publisher: Publisher | None = None,
    topology: Topology | None = None,
) -> Accepted:
    """Store the event durably, then publish its deliveries (after the answer, in a request;
    the relay covers whatever is not confirmed)."""
    if event_type in OPERATIONAL_EVENT_TYPES:
        raise ReservedEventType(f"{event_type!r} is reserved for events the service raises itself")
    in_request = publisher is None
    publisher, topology, rate_limit = request_defaults(publisher, topology)
    accepted = store_event(tenant, event_type, payload, idempotency_key, rate_limit=rate_limit)
    if not accepted.replayed:
        messages = [message_for(d, accepted.event) for d in accepted.deliveries if d.status == "pending"]
        if in_request:
            # The answer does not wait for the broker: published right after, in batches.
            current_app.extensions["webhooks.enqueuer"].submit(messages)
        else:
            enqueue(publisher, topology, messages)
        metrics.EVENTS.inc()
        log.info(
            "accepted event=%s tenant=%s type=%s seq=%d deliveries=%d",
            accepted.event.id, tenant.id, event_type, accepted.event.seq, len(accepted.deliveries),
        )
    return accepted


def request_defaults(publisher: Publisher | None, topology: Topology | None) -> tuple[Publisher, Topology, float | None]:
    """The app's publisher, topology and ingest rate limit (outside a request: as given, unlimited)."""
    if publisher is not None and topology is not None:
        return publisher, topology, None
    settings = current_app.extensions["webhooks.settings"]
    return (
        publisher or current_app.extensions["webhooks.publisher"],
        topology or settings.topology,
        settings.ingest_rate_limit,
    )
