"""An endpoint's backlog in the database: deliveries a worker moved out of memory, and taking them back.

A worker holds a bounded number of messages in memory. Beyond that bound (or when a
lane would keep them waiting too long: a slow or rate-limited endpoint) it marks the
newest messages' deliveries ``spilled`` here and acks the messages, so the broker's
queue keeps flowing for everybody else. When the endpoint's lane runs short, a worker
takes the oldest spilled deliveries straight back into the lane, with no trip through
the broker: ``take_spilled`` moves their mark into the future (``TAKE_HOLD_SECONDS``),
which hides them from every other worker until then. Their attempt clears the mark
when it is recorded; a worker that stops first gives them back (``give_back``), and if
it dies, the mark's time passes and another worker's scan for orphaned backlogs takes
them. ``stuck`` finds deliveries whose message was lost (dead-lettered by the delivery
limit, a purged queue), for the clock to republish.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any, Sequence

from peewee import fn

from webhooks.storage import delivery_sql
from webhooks.storage.db import database, durable_commit, retrying, write
from webhooks.messaging.messages import DeliveryMessage
from webhooks.storage.payload_json import PayloadJSON
from webhooks.storage.ids import id_floor
from webhooks.storage.models import Attempt, Delivery, Event
from webhooks.messaging.outbox import overdue_in_ladder
from webhooks.storage.timeutil import isoformat, utcnow

@retrying
def spill(messages: Sequence[DeliveryMessage]) -> list[bool]:
    """Mark each message's delivery as waiting in the database; True for each one marked.

    Only a ladder attempt that is still the next one is marked; any other message is
    stale anyway. The commit is durable: the caller acks the messages after it.
    """
    if not messages:
        return []
    now = utcnow()
    sql = delivery_sql.spill_sql(len(messages))
    params: list[Any] = [value for m in delivery_sql.in_lock_order(messages) for value in (m.delivery_id, m.attempt - 1)]
    params.append(Delivery.spilled_at.db_value(now))
    with write():
        durable_commit()
        marked = {delivery_id for delivery_id, in database.execute_sql(sql, params).fetchall()}
    return [message.delivery_id in marked for message in messages]


#: How long deliveries taken back into a worker's memory stay hidden from other workers
#: (seconds). A lane takes only what it sends within about ``spill.HOLD_SECONDS``; if the
#: worker dies, its share of the backlog is taken again after this time. A delivery still
#: waiting in a lane when its hold ends may be taken by a second worker too: its claim
#: then lets one attempt through (``webhooks.delivery.claims``).
TAKE_HOLD_SECONDS = 120.0


@retrying
def take_spilled(endpoint_id: str, limit: int, hold_seconds: float | None = None) -> list[DeliveryMessage]:
    """Take up to ``limit`` of the endpoint's spilled deliveries that no worker holds, oldest
    first, as the messages of their next attempts; they stay hidden from other workers for
    ``hold_seconds`` (``TAKE_HOLD_SECONDS``), until their attempt is recorded, or ``give_back``."""
    now = utcnow()
    hold_seconds = TAKE_HOLD_SECONDS if hold_seconds is None else hold_seconds
    stamp = Delivery.spilled_at.db_value
    with write():
        cursor = database.execute_sql(delivery_sql.take_spilled_sql(),
                                      [stamp(now + timedelta(seconds=hold_seconds)), endpoint_id, stamp(now), limit])
        ids = [delivery_id for delivery_id, in cursor.fetchall()]
        if not ids:
            return []
        rows = (
            Delivery.select(Delivery.id, Delivery.endpoint_id, Delivery.tenant_id, Delivery.attempts, Event.id,
                            Event.event_type, Event.created_at, Event.payload.coerce(False), Event.traceparent)
            .join(Event).where(Delivery.id.in_(ids)).order_by(Delivery.created_at, Delivery.id).tuples()
        )
        return [_message(*row) for row in rows]


def _message(delivery_id: str, endpoint_id: str, tenant_id: str, attempts: int, event_id: str, event_type: str,
             created_at: datetime, payload: str, traceparent: str | None = None) -> DeliveryMessage:
    """The next ladder attempt's message, the payload kept as the JSON text it is stored as.

    ``PayloadField`` stores the compact JSON ``payload_json`` makes, keys in the order they
    came, so the text is the payload's bytes as every other attempt sends them: parsing it
    only to write it out again would cost most of a fetch's time.
    """
    return DeliveryMessage(delivery_id=delivery_id, event_id=event_id, endpoint_id=endpoint_id, tenant_id=tenant_id,
                           event_type=event_type, event_created_at=isoformat(created_at) or "",
                           payload=PayloadJSON(payload.encode()), attempt=attempts + 1, traceparent=traceparent)


@retrying
def give_back(messages: Sequence[DeliveryMessage]) -> None:
    """Taken back and not attempted (the worker stops, or lost its broker session): any worker may take them now."""
    if not messages:
        return
    now = utcnow()
    ids = sorted({message.delivery_id for message in messages})
    Delivery.update(spilled_at=now).where(Delivery.id.in_(ids) & (Delivery.spilled_at > now)).execute()


@retrying
def spilled_endpoints(limit: int = 1000) -> list[str]:
    """Endpoints with deliveries waiting in the database that no worker holds (off the partial index)."""
    query = (Delivery.select(Delivery.endpoint_id).distinct()
             .where(Delivery.spilled_at.is_null(False) & (Delivery.spilled_at <= utcnow())).limit(limit))
    return [endpoint_id for endpoint_id, in query.tuples()]


@retrying
def stuck(older_than: float, idle_for: float, limit: int = 500) -> list[tuple[Delivery, Event]]:
    """Deliveries in the ladder, their message confirmed long ago, yet overdue by ``older_than``
    seconds, held by no worker, and of an endpoint that made no attempt for ``idle_for`` seconds:
    their message was lost (or is held where no worker can reach it)."""
    since = id_floor("att", int((time.time() - idle_for) * 1000))
    moving = Attempt.select(Attempt.id).where((Attempt.endpoint == Delivery.endpoint) & (Attempt.id >= since))
    return overdue_in_ladder(
        Delivery.enqueued_at.is_null(False) & Delivery.spilled_at.is_null() & ~fn.EXISTS(moving), older_than, limit
    )


@retrying
def mark_republished(delivery_ids: Sequence[str], now: datetime) -> None:
    """The stuck deliveries' new messages are out: due now, and not stuck again for a while."""
    if delivery_ids:
        Delivery.update(next_attempt_at=now, enqueued_at=now).where(Delivery.id.in_(list(delivery_ids))).execute()
