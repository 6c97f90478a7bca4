"""Accepting events: one transaction (events, seqs, deliveries, idempotency keys), then publish.

One event (``POST /v1/events``) and a batch (``POST /v1/events/batch``) take the same
path: a batch of one is a single event. The per-tenant ``seq`` is bumped by the number
of new events with ``UPDATE … RETURNING`` inside the transaction, so the tenant row is
locked until commit and ``seq`` order is commit order: a reader of ``after=n`` can never
miss a smaller seq committed later; a batch's events take consecutive seqs in list order.
The same statement spends the batch's cost from the tenant's ingest rate limit (a bucket
on the tenant row, refilled in SQL from the time since its last use): a token per event,
or per delivery when its events make more deliveries than there are events (``Plan.cost``:
a fan-out is paid for by what it makes, not by the bytes posted), so checking and
spending are one atomic step under that lock; a refusal rolls everything back and
nothing is written.

This is the hot path of ingestion, so on PostgreSQL it is two round trips with
precomputed SQL (no ORM query building), each a transaction of its own:

1. ``SELECT …``: whether any idempotency key is on file, and the tenant's live
   endpoints (``ingest_sql.postgres_read_sql``); nothing is locked;
2. ``WITH bumped AS (UPDATE tenant … RETURNING …), … INSERT event …, INSERT
   idempotency_key …, INSERT delivery … SELECT …``: one statement
   (``ingest_sql.postgres_write_sql``), so the tenant row is locked only while the
   server runs it and commits, never while this process plans or waits for the network.

Each connection prepares the read, and the write of a single event, once (server-side
``PREPARE``), so PostgreSQL does not plan them again for every event. When a key is on
file, the keys are looked up and the items still new are stored afresh; when the bump
gives no seq (the tenant's tokens ran out, or the tenant is gone), nothing was written
and the statements below say why: replays and refusals cost more round trips, first
sends do not.

The 202 is only sent once that commit has returned (``synchronous_commit`` is left on).
On SQLite, or when the caller already has a transaction open (operational events), the
same statements run one at a time inside ``write()``.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Iterable, Sequence

import peewee
from flask import current_app

from webhooks.errors import InvalidInput, NotFound, Refused
from webhooks import metrics
from webhooks.catalog import registry
from webhooks.event_types import OPERATIONAL_EVENT_TYPES
from webhooks.ingest import idempotency
from webhooks.ingest.idempotency import IdempotencyConflict, request_hash
from webhooks.ingest.plan import Accepted, NewEvent, Plan, plan_rows, routes_of
from webhooks.messaging.outbox import enqueue, message_for
from webhooks.messaging.publisher import Publisher
from webhooks.messaging.topology import Topology
from webhooks.observability import tracing
from webhooks.storage.db import database, is_postgres, retrying, write
from webhooks.storage.ingest_sql import (
    POSTGRES,
    SQLITE,
    bump_params,
    bump_sql,
    delete_keys_sql,
    endpoints_sql,
    postgres_read_sql,
)
from webhooks.storage.models import Delivery, Event, Tenant
from webhooks.storage.pg_prepared import NOT_NULL_VIOLATION, PreparedStatements, pgcode
from webhooks.storage.timeutil import utcnow
from webhooks.storage.statuses import DeliveryStatus

log = logging.getLogger(__name__)

#: Events one ``POST /v1/events/batch`` may carry.
MAX_BATCH = 500


class ReservedEventType(InvalidInput):
    """Operational event types are raised by the service only."""


class RateLimited(Refused):
    """The tenant sends events (or makes deliveries) faster than ``INGEST_RATE_LIMIT``; nothing was written."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"too many events: at most the tenant's rate limit per second, counted in events or in the "
                         f"deliveries they make when more; retry in {retry_after:.2f}s")
        self.retry_after = retry_after


class BatchOverRateLimit(InvalidInput):
    """A batch costs more than the tenant's bucket can ever hold (one second's worth)."""


def _within_bucket(plan: Plan, rate_limit: float | None) -> None:
    """BatchOverRateLimit when the batch's deliveries alone are more than the bucket ever holds."""
    cost = plan.cost()
    if rate_limit is not None and cost > rate_limit:
        events = "1 event makes" if len(plan.events) == 1 else f"{len(plan.events)} events make"
        raise BatchOverRateLimit(f"{events} {cost} deliveries, more than the tenant's rate limit allows at once "
                                 f"({rate_limit:g} per second, counted in events or in the deliveries they make): "
                                 f"send fewer events a request, or subscribe fewer endpoints to them")


class UnknownTenant(NotFound):
    """The tenant row is gone (deleted while its key was still cached)."""


def _last_seq(row: Sequence[Any] | None, rate_limit: float | None) -> int:
    """The last seq of the batch, or RateLimited when the bump found too few tokens left."""
    if row is None:
        raise UnknownTenant("tenant not found")
    seq, tokens = row[0], row[1]
    if rate_limit is not None and tokens < 0:
        # ``tokens`` is what was left minus what this batch would have spent.
        raise RateLimited(-tokens / rate_limit)
    return int(seq)


# --- storing -------------------------------------------------------------------------------


#: Which statements each connection has prepared (``PG_PREPARED_STATEMENTS``).
prepared = PreparedStatements()


class _KeySeen(Exception):
    """PostgreSQL fast path: an idempotency key is on file; go look them up."""


class _NotBumped(Exception):
    """PostgreSQL fast path: the tenant row gave no seq (gone, or no tokens left); nothing written."""


def _store_postgres(tenant_id: str, items: Sequence[NewEvent], digests: Sequence[str | None], expired: list[str],
                    exclude_endpoint: str | None, rate_limit: float | None) -> list[Accepted]:
    """Two round trips, each a transaction of its own (peewee's connection is in autocommit)."""
    now = utcnow()
    keys = [item.key for item in items if item.key is not None and item.key not in expired]
    database.connect(reuse_if_open=True)
    read_name, read = f"ingest_read_{int(bool(keys))}", postgres_read_sql(bool(keys))
    prepared.prepare(read_name, read)  # once per connection
    try:
        rows = database.execute_sql(prepared.sql_for(read_name, read),
                                    [tenant_id, keys, tenant_id] if keys else [tenant_id]).fetchall()
        if rows[0][0]:  # before the bucket: replayed items spend no token
            raise _KeySeen()
        plan = plan_rows(tenant_id, items, digests, now, routes_of(row[1:] for row in rows if row[1] is not None),
                         exclude_endpoint)
        _within_bucket(plan, rate_limit)
        name, sql, params = plan.write_statement(rate_limit is not None,
                                                 bump_params(POSTGRES, tenant_id, rate_limit, now, len(items),
                                                             plan.cost()))
        if name is not None:
            prepared.prepare(name, sql)  # once per connection and shape (a single event)
            sql = prepared.sql_for(name, sql)
        if expired:  # in the same transaction: the string is one implicit transaction
            sql, params = f"{delete_keys_sql(POSTGRES, len(expired))}; {sql}", [tenant_id, *expired, *params]
        last = database.execute_sql(sql, params).fetchone()[0]
    except peewee.DatabaseError as error:
        if pgcode(error) == NOT_NULL_VIOLATION:  # no seq: the tenant is gone or out of tokens; nothing was written
            raise _NotBumped() from error
        raise
    plan.number(int(last) - len(items) + 1)
    return plan.accepted()


def _store_generic(tenant_id: str, items: Sequence[NewEvent], digests: Sequence[str | None], expired: list[str],
                   exclude_endpoint: str | None, rate_limit: float | None) -> list[Accepted]:
    """The same statements one by one, inside the caller's ``write()`` (SQLite, or an enclosing transaction)."""
    dialect = POSTGRES if is_postgres() else SQLITE
    now = utcnow()
    routes = routes_of(database.execute_sql(endpoints_sql(dialect), [tenant_id]).fetchall())
    plan = plan_rows(tenant_id, items, digests, now, routes, exclude_endpoint)
    _within_bucket(plan, rate_limit)
    bump = bump_sql(dialect, rate_limit is not None)
    cursor = database.execute_sql(bump, bump_params(dialect, tenant_id, rate_limit, now, len(items), plan.cost()))
    last = _last_seq(cursor.fetchone(), rate_limit)
    plan.number(last - len(items) + 1)
    for statement, values in plan.statements(dialect, tenant_id, expired):
        database.execute_sql(statement, values)
    return plan.accepted()


def _earlier_events(event_ids: Iterable[str]) -> dict[str, Accepted]:
    """The events named by keys on file, with their deliveries, marked replayed."""
    ids = list(set(event_ids))
    if not ids:
        return {}
    events = {event.id: event for event in Event.select().where(Event.id.in_(ids))}
    deliveries: dict[str, list[Delivery]] = {event_id: [] for event_id in events}
    for delivery in Delivery.select().where(Delivery.event.in_(ids)).order_by(Delivery.id):
        deliveries[delivery.event_id].append(delivery)
    return {event_id: Accepted(event, deliveries[event_id], replayed=True) for event_id, event in events.items()}


def _keyed(items: Sequence[NewEvent], digests: Sequence[str | None],
           indexes: Iterable[int]) -> dict[str, tuple[int, str]]:
    return {items[i].key: (i, digests[i]) for i in indexes if items[i].key is not None}  # type: ignore[misc]


def _store_new(tenant_id: str, items: Sequence[NewEvent], digests: Sequence[str | None],
               exclude_endpoint: str | None, rate_limit: float | None) -> tuple[dict[int, Accepted], dict[int, str]]:
    """Store the items whose keys are not on file: ``({index: stored}, {index: earlier event id})``."""
    todo = list(range(len(items)))
    on_file = idempotency.OnFile()

    def store(store_fn: Callable[..., list[Accepted]]) -> dict[int, Accepted]:
        if not todo:
            return {}
        stored = store_fn(tenant_id, [items[i] for i in todo], [digests[i] for i in todo], on_file.expired,
                          exclude_endpoint, rate_limit)
        return dict(zip(todo, stored))

    def look_up() -> None:
        nonlocal todo, on_file
        on_file = idempotency.look_up(tenant_id, _keyed(items, digests, todo), utcnow())
        todo = [i for i in todo if i not in on_file.replays]

    if is_postgres() and not database.in_transaction():
        for _ in range(4):
            try:
                # A vanished prepared statement wrote nothing: run once more, prepared again.
                return prepared.again_if_vanished(lambda _: store(_store_postgres)), on_file.replays
            except _KeySeen:
                with write():
                    look_up()
            except _NotBumped:
                break  # the statements one by one say why (RateLimited, UnknownTenant) or, refilled, succeed
        else:
            raise RuntimeError("could not store the events (idempotency keys kept changing)")
    with write():
        if any(item.key is not None for item in items):
            look_up()
        return store(_store_generic), on_file.replays


@retrying
def store_events(
    tenant: Tenant,
    items: Sequence[NewEvent],
    *,
    exclude_endpoint: str | None = None,
    rate_limit: float | None = None,
) -> list[Accepted]:
    """Write the new events and their deliveries in one transaction, in list order; answer in list order.

    An item whose key is on file (or repeats an earlier item's key) gets the earlier event,
    marked replayed, and spends neither a seq nor a token. ``IdempotencyConflict`` names
    the items whose key was used with a different request; nothing is written then.
    ``exclude_endpoint``: an operational event is not sent to the endpoint it is about.
    ``rate_limit``: events per second this tenant may send (None: unlimited).
    """
    digests = [None if item.key is None else request_hash(item.event_type, item.payload) for item in items]
    repeats = idempotency.repeats_within([item.key for item in items], digests)
    firsts = [i for i in range(len(items)) if i not in repeats]
    args = ([items[i] for i in firsts], [digests[i] for i in firsts], exclude_endpoint, rate_limit)
    try:
        try:
            stored, replays = _store_new(tenant.id, *args)
        except peewee.IntegrityError:
            # Lost a race for an idempotency key: the winner has committed; now it is on file.
            if all(item.key is None for item in items) or database.in_transaction():
                raise
            stored, replays = _store_new(tenant.id, *args)
    except IdempotencyConflict as conflict:  # positions among ``firsts`` -> positions in ``items``
        raise IdempotencyConflict([(firsts[position], key) for position, key in conflict.conflicts]) from None
    earlier = _earlier_events(replays.values())
    results: list[Accepted] = [None] * len(items)  # type: ignore[list-item]
    for position, index in enumerate(firsts):
        results[index] = stored[position] if position in stored else earlier[replays[position]]
    for index, first in repeats.items():
        results[index] = Accepted(results[first].event, results[first].deliveries, replayed=True)
    return results


def store_event(
    tenant: Tenant,
    event_type: str,
    payload: dict[str, Any],
    key: str | None,
    *,
    exclude_endpoint: str | None = None,
    rate_limit: float | None = None,
) -> Accepted:
    """``store_events`` of one event."""
    return store_events(tenant, [NewEvent(event_type, payload, key)], exclude_endpoint=exclude_endpoint,
                        rate_limit=rate_limit)[0]


def accept_events(
    tenant: Tenant,
    items: Sequence[NewEvent],
    *,
    publisher: Publisher | None = None,
    topology: Topology | None = None,
) -> list[Accepted]:
    """Store the events durably, then publish their deliveries (after the answer, in a request;
    the relay covers whatever is not confirmed)."""
    reserved = sorted({item.event_type for item in items if item.test_endpoint is None} & OPERATIONAL_EVENT_TYPES)
    if reserved:
        raise ReservedEventType(f"{reserved[0]!r} is reserved for events the service raises itself")
    in_request = publisher is None
    if in_request:  # what tenants post; the service's own events are its own
        registry.of_app(current_app).check(items)
    publisher, topology, rate_limit = request_defaults(publisher, topology)
    if rate_limit is not None and len(items) > rate_limit:
        raise BatchOverRateLimit(f"a batch of {len(items)} events is more than the tenant's rate limit allows at once "
                                 f"({rate_limit:g} events per second): send smaller batches")
    with tracing.side_span("ingest.transaction", events=len(items)):
        accepted = store_events(tenant, items, rate_limit=rate_limit)
    new = [a for a in accepted if not a.replayed]
    _annotate(tenant, items, accepted)
    if new:
        messages = [message_for(d, a.event) for a in new for d in a.deliveries if d.status == DeliveryStatus.PENDING]
        if in_request:
            # The answer does not wait for the broker: published right after, in batches.
            current_app.extensions["webhooks.enqueuer"].submit(messages)
        else:
            enqueue(publisher, topology, messages)
        metrics.EVENTS.inc(len(new))
        log.info(
            "accepted %s tenant=%s seq=%d%s deliveries=%d",
            f"event={new[0].event.id} type={new[0].event.event_type}" if len(new) == 1 else f"{len(new)} events",
            tenant.id, new[0].event.seq, "" if len(new) == 1 else f"-{new[-1].event.seq}",
            sum(len(a.deliveries) for a in new),
        )
    return accepted


def _annotate(tenant: Tenant, items: Sequence[NewEvent], accepted: Sequence[Accepted]) -> None:
    """What the request's span says of its events (while tracing is on)."""
    if not tracing.on():
        return
    types = {item.event_type for item in items}
    replayed = sum(1 for one in accepted if one.replayed)
    tracing.annotate(tenant_id=tenant.id, event_type=next(iter(types)) if len(types) == 1 else None,
                     event_id=accepted[0].event.id if len(accepted) == 1 else None, events=len(items),
                     replayed=replayed > 0, replayed_events=replayed,
                     deliveries=sum(len(one.deliveries) for one in accepted if not one.replayed))


def accept_test_event(tenant: Tenant, endpoint_id: str, event_type: str, payload: dict[str, Any]) -> Accepted:
    """A test event (``"test": true``) for one endpoint only, whatever it subscribes to or filters on (the
    portal's "send a test event", ``send-example``), then published like any other: the same event row,
    seq, delivery, ladder and attempts, no other endpoint involved; left out of the feed unless asked."""
    return accept_events(tenant, [NewEvent(event_type, payload, test_endpoint=endpoint_id)])[0]


def accept_event(
    tenant: Tenant,
    event_type: str,
    payload: dict[str, Any],
    idempotency_key: str | None = None,
    *,
    publisher: Publisher | None = None,
    topology: Topology | None = None,
) -> Accepted:
    """``accept_events`` of one event."""
    return accept_events(tenant, [NewEvent(event_type, payload, idempotency_key)], publisher=publisher,
                         topology=topology)[0]


def request_defaults(publisher: Publisher | None,
                     topology: Topology | None) -> tuple[Publisher, Topology, float | None]:
    """The app's publisher, topology and ingest rate limit (outside a request: as given, unlimited)."""
    if publisher is not None and topology is not None:
        return publisher, topology, None
    settings = current_app.extensions["webhooks.settings"]
    return (
        publisher or current_app.extensions["webhooks.publisher"],
        topology or settings.topology,
        settings.ingest_rate_limit,
    )
