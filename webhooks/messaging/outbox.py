"""The transactional outbox: publish queued deliveries, and republish what was never confirmed.

A delivery row whose ``enqueued_at`` is empty still needs a message. Whoever wrote it
publishes right after commit and marks it; when that publish failed (broker down, a
crash in between) the relay in the clock process finds the row once it is overdue and
publishes it. Duplicates are harmless: the worker's claim drops the extra copy.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any, Iterable, Sequence

from webhooks.storage.db import RELAXED_COMMIT, database, is_postgres, relaxed_commit, retrying, write
from webhooks.messaging.messages import DeliveryMessage
from webhooks.observability import tracing
from webhooks.storage import delivery_sql
from webhooks.storage.models import Delivery, Event
from webhooks.messaging.publisher import Publisher
from webhooks.storage.statuses import LADDER_STATUSES
from webhooks.storage.timeutil import isoformat, utcnow
from webhooks.messaging.topology import Topology

log = logging.getLogger(__name__)


#: Rows republished per relay pass.
RELAY_BATCH = 500


def message_for(delivery: Delivery, event: Event, trigger: str = "ladder") -> DeliveryMessage:
    """The message for the next attempt of ``delivery``.

    Its trace: a ladder attempt's is the event's (the request that posted it), wherever the
    message is made again (relay, release, sweep); a resend's or a recover's is the current
    span's, the request that asked for it, which is linked to the event's trace here.
    """
    stored = getattr(event, "traceparent", None)
    if trigger == "ladder":
        traceparent = stored or tracing.current_traceparent()
    else:
        tracing.link_current_to(stored, event_id=event.id, delivery_id=delivery.id)
        traceparent = tracing.current_traceparent() or stored
    return DeliveryMessage(
        delivery_id=delivery.id,
        event_id=event.id,
        endpoint_id=delivery.endpoint_id,
        tenant_id=delivery.tenant_id,
        event_type=event.event_type,
        event_created_at=isoformat(event.created_at) or "",
        payload=event.payload,
        attempt=delivery.attempts + 1,
        trigger=trigger,
        traceparent=traceparent,
    )


def publish_messages(publisher: Publisher, topology: Topology, messages: Sequence[DeliveryMessage],
                     bulk: frozenset[str] = frozenset()) -> int:
    """Publish to the primary queue (the messages of the tenants in ``bulk``: to the bulk queue);
    returns how many (a prefix, in order) were confirmed."""
    return publisher.publish([(topology.bulk if message.tenant_id in bulk else topology.primary, *message.encode())
                              for message in messages])


@retrying
def mark_enqueued(messages: Iterable[DeliveryMessage]) -> None:
    """Record that each message was confirmed, unless its delivery has moved on since.

    One statement per attempt number; on PostgreSQL outside a transaction the whole
    mark is one round trip and one implicit transaction (``SET LOCAL …; UPDATE …``).
    """
    now = utcnow()
    by_attempt: dict[int, list[str]] = {}
    for message in messages:
        by_attempt.setdefault(message.attempt, []).append(message.delivery_id)
    if not by_attempt:
        return
    if is_postgres() and not database.in_transaction():
        statements = [RELAXED_COMMIT]  # a lost mark costs a duplicate only
        params: list[Any] = []
        for attempt, delivery_ids in by_attempt.items():
            statements.append(delivery_sql.mark_enqueued_sql())
            params += [now, delivery_ids, attempt - 1]
        database.execute_sql("; ".join(statements), params)  # the string is one transaction
        return
    with write():
        relaxed_commit()  # a lost mark only means the relay publishes a duplicate
        for attempt, delivery_ids in by_attempt.items():  # one statement per attempt number
            (
                Delivery.update(enqueued_at=now)
                .where(
                    Delivery.id.in_(delivery_ids)
                    & (Delivery.attempts == attempt - 1)
                    & Delivery.enqueued_at.is_null()
                )
                .execute()
            )


def enqueue(publisher: Publisher, topology: Topology, messages: Sequence[DeliveryMessage]) -> int:
    """Publish and mark; what is not confirmed is left to the relay. Returns the count confirmed."""
    if not messages:
        return 0
    confirmed = publish_messages(publisher, topology, messages)
    if confirmed:
        mark_enqueued(messages[:confirmed])
    return confirmed


def overdue_in_ladder(condition: Any, older_than: float, limit: int) -> list[tuple[Delivery, Event]]:
    """Deliveries in the ladder due more than ``older_than`` seconds ago, held by no worker
    (no live lease) and matching ``condition``, most overdue first, with their events."""
    now = utcnow()
    rows = (
        Delivery.select(Delivery, Event)
        .join(Event)
        .where(
            Delivery.status.in_(LADDER_STATUSES)
            & condition
            & (Delivery.next_attempt_at <= now - timedelta(seconds=older_than))
            & (Delivery.lease_until.is_null() | (Delivery.lease_until < now))
        )
        .order_by(Delivery.next_attempt_at, Delivery.id)
        .limit(limit)
    )
    return [(row, row.event) for row in rows]


@retrying
def overdue(grace: float, limit: int = RELAY_BATCH) -> list[tuple[Delivery, Event]]:
    """Deliveries whose next attempt is due for ``grace`` seconds with no confirmed message."""
    return overdue_in_ladder(Delivery.enqueued_at.is_null(), grace, limit)


def relay_once(publisher: Publisher, topology: Topology, grace: float) -> int:
    """One relay pass; returns how many deliveries were republished.

    With tracing on, a pass that republishes makes one ``relay`` span (never one per message),
    linked to some of the traces whose deliveries it republished; the attempts that follow
    join their events' traces through the messages.
    """
    rows = overdue(grace)
    if not rows:
        return 0
    started = tracing.now_ns()
    messages = [message_for(delivery, event) for delivery, event in rows]
    confirmed = enqueue(publisher, topology, messages)
    log.info("relay republished %d of %d overdue deliveries", confirmed, len(rows))
    tracing.summary_span("relay", started, [message.traceparent for message in messages], overdue=len(rows),
                         republished=confirmed)
    return confirmed
