"""What people do to deliveries and endpoints: resend, recover, delete, disable and enable.

Shared by the API, the console and the CLI so each action has one implementation.
"""

from __future__ import annotations

from datetime import datetime

from webhooks import presence
from webhooks.db import locking, retrying, write
from webhooks.messages import DeliveryMessage
from webhooks.models import Delivery, Endpoint, Event
from webhooks.outbox import message_for, publish_messages
from webhooks.publisher import Publisher
from webhooks.statuses import LADDER_STATUSES, UNFINISHED_STATUSES
from webhooks.timeutil import to_naive_utc, utcnow
from webhooks.topology import Topology

#: Deliveries ``recover`` resends.
RECOVERABLE_STATUSES = ("failed", "parked")


#: Resends published per broker round of ``recover``.
RECOVER_BATCH = 500


class BrokerUnavailable(Exception):
    """The message could not be queued; nothing was changed."""


def _context(publisher: Publisher | None, topology: Topology | None) -> tuple[Publisher, Topology]:
    from webhooks.ingest import request_defaults

    publisher, topology, _ = request_defaults(publisher, topology)
    return publisher, topology


def _queue_now(messages: list[DeliveryMessage], publisher: Publisher, topology: Topology) -> int:
    """Publish fresh attempts and show finished deliveries as due now; returns how many were queued.

    A delivery still in the ladder keeps its ``next_attempt_at``: if the fresh attempt
    fails, its next ladder attempt stays due when it was (a resend never moves a delivery
    down the ladder).
    """
    confirmed = publish_messages(publisher, topology, messages)
    now = utcnow()
    with write():
        for message in messages[:confirmed]:
            (
                Delivery.update(next_attempt_at=now, updated_at=now)
                .where(
                    (Delivery.id == message.delivery_id)
                    & (Delivery.attempts == message.attempt - 1)
                    & Delivery.status.not_in(LADDER_STATUSES)
                )
                .execute()
            )
    return confirmed


@retrying
def resend(
    delivery: Delivery,
    trigger: str = "resend",
    *,
    publisher: Publisher | None = None,
    topology: Topology | None = None,
) -> Delivery:
    """Queue a fresh attempt of ``delivery`` now, outside the ladder (or ahead of it)."""
    if delivery.status == "cancelled":
        raise ValueError("the delivery was cancelled because its endpoint was deleted")
    publisher, topology = _context(publisher, topology)
    message = message_for(delivery, Event.get_by_id(delivery.event_id), trigger=trigger)
    if _queue_now([message], publisher, topology) != 1:
        raise BrokerUnavailable("the message broker is unavailable; try again in a few seconds")
    return Delivery.get_by_id(delivery.id)


def recover(
    endpoint: Endpoint,
    since: datetime,
    *,
    publisher: Publisher | None = None,
    topology: Topology | None = None,
) -> int:
    """Resend every failed or parked delivery of ``endpoint`` created since ``since``."""
    publisher, topology = _context(publisher, topology)
    query = (
        Delivery.select(Delivery, Event)
        .join(Event)
        .where(
            (Delivery.endpoint == endpoint)
            & Delivery.status.in_(RECOVERABLE_STATUSES)
            & (Delivery.created_at >= to_naive_utc(since))
        )
        .order_by(Delivery.created_at, Delivery.id)
    )
    rows = list(query)
    queued = 0
    for start in range(0, len(rows), RECOVER_BATCH):
        batch = [message_for(row, row.event, trigger="recover") for row in rows[start : start + RECOVER_BATCH]]
        done = _queue_now(batch, publisher, topology)
        queued += done
        if done < len(batch):
            break
    if rows and not queued:
        raise BrokerUnavailable("the message broker is unavailable; try again in a few seconds")
    return queued


@retrying
def delete_endpoint(endpoint: Endpoint) -> None:
    """Soft-delete ``endpoint`` (its attempts stay visible) and cancel what it was still owed."""
    now = utcnow()
    with write():
        Endpoint.update(deleted_at=now, updated_at=now).where(Endpoint.id == endpoint.id).execute()
        (
            Delivery.update(status="cancelled", next_attempt_at=None, updated_at=now)
            .where((Delivery.endpoint == endpoint) & Delivery.status.in_(UNFINISHED_STATUSES))
            .execute()
        )


@retrying
def set_endpoint_disabled(endpoint: Endpoint, disabled: bool, reason: str | None = None) -> Endpoint:
    """Disable ``endpoint`` (it gets no calls; its deliveries park) or enable it again.

    Enabling hands its parked deliveries to the clock, which releases them in order, paced.
    """
    now = utcnow()
    with write():
        row = locking(Endpoint.select().where(Endpoint.id == endpoint.id)).get()
        if disabled:
            presence.disable(row, reason or "disabled by a person", now)
        else:
            presence.enable(row, now)
    return Endpoint.get_by_id(endpoint.id)
