"""The transactional outbox: publish queued deliveries, and republish what was never confirmed.

A delivery row whose ``enqueued_at`` is empty still needs a message. Whoever wrote it
publishes right after commit and marks it; when that publish failed (broker down, a
crash in between) the relay in the clock process finds the row once it is overdue and
publishes it. Duplicates are harmless: the worker's claim drops the extra copy.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Iterable, Sequence

from webhooks.db import retrying, write
from webhooks.messages import DeliveryMessage
from webhooks.models import Delivery, Event
from webhooks.publisher import Publisher
from webhooks.timeutil import isoformat, utcnow
from webhooks.topology import Topology

log = logging.getLogger(__name__)

#: Statuses whose next attempt is the relay's business (the ladder is running).
LADDER_STATUSES = ("pending", "retrying")

#: Rows republished per relay pass.
RELAY_BATCH = 500


def message_for(delivery: Delivery, event: Event, trigger: str = "ladder") -> DeliveryMessage:
    """The message for the next attempt of ``delivery``."""
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
    )


def publish_messages(publisher: Publisher, topology: Topology, messages: Sequence[DeliveryMessage]) -> int:
    """Publish to the primary queue; returns how many (a prefix, in order) were confirmed."""
    return publisher.publish([(topology.primary, *message.encode()) for message in messages])


@retrying
def mark_enqueued(messages: Iterable[DeliveryMessage]) -> None:
    """Record that each message was confirmed, unless its delivery has moved on since."""
    now = utcnow()
    with write():
        for message in messages:
            (
                Delivery.update(enqueued_at=now)
                .where(
                    (Delivery.id == message.delivery_id)
                    & (Delivery.attempts == message.attempt - 1)
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


@retrying
def overdue(grace: float, limit: int = RELAY_BATCH) -> list[tuple[Delivery, Event]]:
    """Deliveries whose next attempt is due for ``grace`` seconds with no confirmed message."""
    now = utcnow()
    rows = (
        Delivery.select(Delivery, Event)
        .join(Event)
        .where(
            Delivery.status.in_(LADDER_STATUSES)
            & Delivery.enqueued_at.is_null()
            & (Delivery.next_attempt_at <= now - timedelta(seconds=grace))
            & (Delivery.lease_until.is_null() | (Delivery.lease_until < now))
        )
        .order_by(Delivery.next_attempt_at, Delivery.id)
        .limit(limit)
    )
    return [(row, row.event) for row in rows]


def relay_once(publisher: Publisher, topology: Topology, grace: float) -> int:
    """One relay pass; returns how many deliveries were republished."""
    rows = overdue(grace)
    if not rows:
        return 0
    messages = [message_for(delivery, event) for delivery, event in rows]
    confirmed = enqueue(publisher, topology, messages)
    log.info("relay republished %d of %d overdue deliveries", confirmed, len(rows))
    return confirmed
