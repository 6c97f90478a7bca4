"""Recording attempts: the attempt row, the delivery's new state and the endpoint's presence.

The engine acks a message only after its attempt is recorded here, durably. Records
come in batches (group commit): one UPDATE moves every delivery of the batch past its
attempt (guarded: only if that attempt is still the next one), one multi-row INSERT
logs the attempts, and only the endpoints whose presence changes are locked and
written, so deliveries to one healthy endpoint do not queue on its row. Such an endpoint
is read once (as it is locked) and written once per batch, whatever the number of its
attempts in it (``presence.EndpointWrites``). A fallback delivery's outcome is not its
endpoint's: it changes no presence. A 410 that disables an endpoint with a fallback makes the
fallback copy of the delivery it parks (``webhooks.ingest.fallback``; the relay publishes it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Mapping, Sequence

import peewee

from webhooks.ingest import fallback
from webhooks.health import presence
from webhooks.storage import delivery_sql, sqltext
from webhooks.storage.db import database, retrying, write
from webhooks.storage.pg_prepared import PreparedStatements, small_batch_name
from webhooks.event_types import OPERATIONAL_EVENT_TYPES
from webhooks.messaging.messages import DeliveryMessage
from webhooks.storage.models import Attempt, Delivery, Endpoint
from webhooks.storage.timeutil import utcnow
from webhooks.storage.statuses import DeliveryStatus


@dataclass(frozen=True)
class Outcome:
    """What to write for one finished attempt."""

    attempt_id: str
    status: str
    next_attempt_at: datetime | None
    #: Attempt-row columns: started_at, duration_ms, url, request_headers, response_*, error*.
    attempt_fields: dict[str, Any]
    last_status_code: int | None
    last_error: str | None
    #: Resends and recovers made so far, this attempt included if it is one.
    manual_attempts: int = 0
    #: False for a 429: the endpoint is up, only busy (it does not count towards offline).
    counts_as_failure: bool = True
    #: Set when the endpoint must be disabled (410 Gone, ``webhook-delivery: disable``).
    disable_reason: str | None = None
    #: The ladder ran out: raise a ``delivery.exhausted`` alert.
    exhausted: bool = False
    #: An attempt of a fallback delivery: logged like any, but not its endpoint's presence.
    fallback: bool = False
    #: The call's timed phases (``HttpResult.phases``), for its span only: never written.
    phases: Mapping[str, float] | None = None


def record(message: DeliveryMessage, outcome: Outcome, offline_after: int) -> bool:
    """Write one attempt; False if another worker recorded this attempt already."""
    return record_many([(message, outcome)], offline_after)[0]


def record_many(items: Sequence[tuple[DeliveryMessage, Outcome]], offline_after: int) -> list[bool]:
    """Write attempts, their deliveries' new state and endpoint presence in one durable commit.

    For each item, True if it is recorded (now, or by this very outcome in a commit
    whose acknowledgement was lost), False if another worker recorded that attempt.
    A batch that breaks a constraint is written again one item at a time, so one bad
    item does not hold up the others.
    """
    try:
        return _record_prepared(items, offline_after)
    except peewee.IntegrityError:
        if len(items) == 1:
            return [_recorded(items[0][1])]
    results: list[bool] = []
    for item in items:
        try:
            results.extend(_record_prepared([item], offline_after))
        except peewee.IntegrityError:
            results.append(_recorded(item[1]))
    return results


#: The small advances this process has prepared, per connection (``pg_prepared``).
prepared = PreparedStatements()


def _record_prepared(items: Sequence[tuple[DeliveryMessage, Outcome]], offline_after: int) -> list[bool]:
    """``_record_batch``, and once more unprepared if a prepared statement has vanished
    (``DISCARD ALL``: the transaction rolled back, nothing was written)."""
    return prepared.again_if_vanished(lambda prepare: _record_batch(items, offline_after, prepare=prepare))


@retrying
def _record_batch(items: Sequence[tuple[DeliveryMessage, Outcome]], offline_after: int,
                  prepare: bool = True) -> list[bool]:
    now = utcnow()
    count = len({message.delivery_id for message, _ in items})
    name = small_batch_name("record_advance", count) if prepare else None
    if name is not None and not database.in_transaction():
        prepared.prepare(name, delivery_sql.advance_sql(count))  # once per connection, outside any transaction
    with write():
        touched = _lock_touched_endpoints(items, now)
        advanced = _advance_deliveries(items, now, name)
        results: list[bool] = []
        fresh: list[tuple[DeliveryMessage, Outcome]] = []
        for message, outcome in items:
            if message.delivery_id in advanced and advanced[message.delivery_id] is outcome:
                fresh.append((message, outcome))
                results.append(True)
            else:
                # Another worker's record, or ours from a commit whose acknowledgement was lost.
                results.append(_recorded(outcome))
        if fresh:
            sqltext.insert_rows(Attempt, [_attempt_row(message, outcome) for message, outcome in fresh])
        _update_presence(fresh, touched, offline_after, now)
    return results


def _recorded(outcome: Outcome) -> bool:
    return Attempt.select().where(Attempt.id == outcome.attempt_id).exists()


def _lock_touched_endpoints(items: Sequence[tuple[DeliveryMessage, Outcome]], now: datetime) -> dict[str, Endpoint]:
    """Lock (in id order, as claims do: no deadlock) the endpoints these outcomes change; them, as locked."""
    endpoints = {
        endpoint.id: endpoint for endpoint in sqltext.models_in(Endpoint, "id", sorted({m.endpoint_id for m, _ in items}))
    }
    touched = sorted(
        {
            message.endpoint_id
            for message, outcome in items
            if message.endpoint_id in endpoints and not outcome.fallback
            and (outcome.disable_reason or presence.needs_update(endpoints[message.endpoint_id], outcome.status == DeliveryStatus.DELIVERED, now))
        }
    )
    return {endpoint.id: endpoint for endpoint in sqltext.models_in(Endpoint, "id", touched, lock=True)}


#: Columns of the batch UPDATE, with their PostgreSQL types (a column of NULLs must not be text).
def _advance_deliveries(items: Sequence[tuple[DeliveryMessage, Outcome]], now: datetime,
                        prepared_as: str | None) -> dict[str, Outcome]:
    """Move each delivery past its attempt if that attempt is still the next one; which moved.

    A delivery twice in one batch (two copies of one attempt) moves with its first outcome.
    ``prepared_as``: the statement's prepared name, if this connection may have it.
    """
    first: dict[str, tuple[DeliveryMessage, Outcome]] = {}
    for message, outcome in items:
        first.setdefault(message.delivery_id, (message, outcome))
    sql = delivery_sql.advance_sql(len(first))
    if prepared_as is not None:
        sql = prepared.sql_for(prepared_as, sql)
    stamp = Delivery.updated_at.db_value
    params: list[Any] = []
    for message, outcome in sorted(first.values(), key=lambda item: item[0].delivery_id):  # lock order
        params += [
            message.delivery_id, message.attempt, outcome.status, stamp(outcome.next_attempt_at),
            outcome.last_status_code, outcome.last_error, None,
            stamp(now) if outcome.status == DeliveryStatus.DELIVERED else None, outcome.manual_attempts,
        ]
    params.append(stamp(now))
    moved = {delivery_id for delivery_id, in database.execute_sql(sql, params).fetchall()}
    return {delivery_id: first[delivery_id][1] for delivery_id in moved}


def _attempt_row(message: DeliveryMessage, outcome: Outcome) -> dict[str, Any]:
    return {
        "id": outcome.attempt_id,
        "delivery": message.delivery_id,
        "tenant": message.tenant_id,
        "event": message.event_id,
        "endpoint": message.endpoint_id,
        "attempt_no": message.attempt,
        "trigger": message.trigger,
        "outcome": outcome.status,
        "next_attempt_at": outcome.next_attempt_at,
        "fallback": outcome.fallback,
        **outcome.attempt_fields,
    }


def _update_presence(items: Sequence[tuple[DeliveryMessage, Outcome]], locked: dict[str, Endpoint],
                     offline_after: int, now: datetime) -> None:
    """Apply the outcomes, in order, to their endpoints that ``_lock_touched_endpoints`` locked
    (as read then): each such endpoint's row is written once, or at each change of its state."""
    writes = {endpoint_id: presence.EndpointWrites(endpoint) for endpoint_id, endpoint in locked.items()}
    for message, outcome in items:
        endpoint_writes = writes.get(message.endpoint_id)
        if endpoint_writes is not None and not outcome.fallback:
            _apply_outcome(endpoint_writes, message, outcome, offline_after, now)
    for endpoint_writes in writes.values():
        endpoint_writes.flush()
    # A 410 parked these and disabled their endpoint: what they carry is missed, tell the fallback.
    fallback.copy_parked([message for message, outcome in items
                          if outcome.disable_reason and outcome.status == DeliveryStatus.PARKED
                          and message.endpoint_id in locked and locked[message.endpoint_id].fallback_url is not None],
                         now)


def _apply_outcome(writes: presence.EndpointWrites, message: DeliveryMessage, outcome: Outcome, offline_after: int,
                   now: datetime) -> None:
    """One outcome on its endpoint, as the outcomes before it in the batch left it."""
    endpoint = writes.endpoint
    if outcome.status == DeliveryStatus.DELIVERED and presence.needs_update(endpoint, True, now):
        presence.record_success(writes, now)
    if outcome.disable_reason:
        writes.disable(outcome.disable_reason, now)
    elif outcome.status != DeliveryStatus.DELIVERED:
        summary = outcome.last_error or "failed"
        presence.record_failure(writes, summary, outcome.counts_as_failure, offline_after, now)
    if outcome.exhausted and message.event_type not in OPERATIONAL_EVENT_TYPES:
        # Never about an operational event: alerts do not raise alerts.
        presence.raise_alert(
            endpoint, "delivery.exhausted", outcome.last_error or "failed", now,
            delivery_id=message.delivery_id, event_id=message.event_id,
            event_type=message.event_type, attempts=message.attempt, last_error=outcome.last_error,
        )
