"""What the clock does for endpoints that were away: release, and give up (probes: ``probes``).

- ``release_next`` / ``unpark_if_next``: the steps of releasing a recovering endpoint's
  parked deliveries in order, one at a time; ``webhooks.health.releaser`` paces them.
- ``disable_failing``: an endpoint failing with no success for ``DISABLE_AFTER`` is disabled.

Fallback copies (``webhooks.ingest.fallback``) are no part of any of this: they are never
parked, and one pending does not hold up the release.

A released delivery is marked ``pending`` with an empty outbox mark by the same
statement (or transaction) that checks that the endpoint is recovering, has nothing
pending and nothing parked older: a crash before the publish leaves it to the relay,
and the status guard means it is never released twice. Only one releaser runs at a
time (the clock's release lock on PostgreSQL; one clock on SQLite).
"""

from __future__ import annotations

import enum
from datetime import timedelta
from typing import Any, Iterable

from peewee import fn

from webhooks.health import presence
from webhooks.storage.db import durable_commit, locking, relaxed_commit, retrying, write
from webhooks.messaging.messages import DeliveryMessage
from webhooks.storage.models import Delivery, Endpoint, Event
from webhooks.messaging.outbox import message_for
from webhooks.storage.timeutil import utcnow
from webhooks.storage.statuses import DeliveryStatus


def live(health: str) -> Any:
    """The condition: an endpoint in ``health``, enabled and not deleted."""
    return (Endpoint.health == health) & (Endpoint.disabled == False) & Endpoint.deleted_at.is_null()  # noqa: E712


def live_endpoints(health: str) -> list[str]:
    return [endpoint_id for (endpoint_id,) in Endpoint.select(Endpoint.id).where(live(health)).tuples()]


def _has_pending(endpoint_id: str) -> bool:
    """A released delivery has not been attempted yet: the next waits for it (arrival order)."""
    return Delivery.select().where(
        (Delivery.endpoint == endpoint_id) & (Delivery.status == DeliveryStatus.PENDING) & ~Delivery.fallback
    ).exists()


def oldest_parked(endpoint_id: str) -> Delivery | None:
    """The endpoint's oldest parked delivery, with its event (the next to release)."""
    return oldest_of(endpoint_id, (DeliveryStatus.PARKED,))


def oldest_of(endpoint_id: str, statuses: Iterable[str]) -> Delivery | None:
    """The endpoint's oldest delivery in one of ``statuses``, with its event.

    No join, and one read per status: the (endpoint, status, created_at, id) index yields
    each status's oldest row at once, where a join, or one read of every status, let a
    planner with stale statistics read and sort every such delivery first.
    """
    oldest: Delivery | None = None
    for status in statuses:
        row = (
            Delivery.select()
            .where((Delivery.endpoint == endpoint_id) & (Delivery.status == status) & ~Delivery.fallback)
            .order_by(Delivery.created_at, Delivery.id)
            .first()
        )
        if row is not None and (oldest is None or (row.created_at, row.id) < (oldest.created_at, oldest.id)):
            oldest = row
    if oldest is not None:
        oldest.event = Event.get_by_id(oldest.event_id)
    return oldest


class Step(enum.Enum):
    """What one attempt to release an endpoint's next delivery came to."""

    #: The oldest parked delivery is ``pending`` now; publish its message.
    RELEASED = "released"
    #: A delivery of the endpoint is still pending (or the oldest parked one just moved): later.
    BUSY = "busy"
    #: Nothing left to release: the endpoint is online again, or no longer recovering.
    DONE = "done"


def release_next(endpoint_id: str) -> tuple[Step, DeliveryMessage | None]:
    """In one transaction on the locked endpoint row: if nothing of it is pending, unpark its oldest.

    The check and the unpark share the transaction, so two released deliveries of one
    endpoint are never pending at once. The commit is relaxed: if a server crash loses
    it, the delivery is ``parked`` again, the worker drops its message as stale, and it
    is released again later. Going online is a durable commit.
    """
    with write():
        relaxed_commit()
        endpoint = locking(Endpoint.select().where(Endpoint.id == endpoint_id)).first()
        if (
            endpoint is None
            or endpoint.health != presence.RECOVERING
            or endpoint.disabled
            or endpoint.deleted_at is not None
        ):
            return Step.DONE, None
        if _has_pending(endpoint_id):
            return Step.BUSY, None
        row = oldest_parked(endpoint_id)
        if row is None:
            durable_commit()
            presence.change(endpoint, presence.ONLINE, "every parked delivery was released", utcnow(),
                            health=presence.ONLINE)
            return Step.DONE, None
        now = utcnow()
        taken = (
            Delivery.update(status=DeliveryStatus.PENDING, next_attempt_at=now, enqueued_at=None, updated_at=now)
            .where((Delivery.id == row.id) & (Delivery.status == DeliveryStatus.PARKED) & (Delivery.attempts == row.attempts))
            .execute()
        )
        if not taken:  # a person's resend or recover got to it first: look again
            return Step.BUSY, None
        return Step.RELEASED, message_for(row, row.event)


def unpark_if_next(candidate: Delivery) -> bool:
    """Release ``candidate`` (read earlier by ``oldest_parked``) if it is still the one to release.

    One guarded statement, so one round trip: the delivery is still parked at the same
    attempt, no delivery of its endpoint is pending, none parked is older, and the
    endpoint is recovering. It takes no lock on the endpoint row: should the endpoint be
    disabled, go offline or be deleted at this very moment, the worker's claim parks or
    cancels the delivery instead of calling. False: nothing changed (``release_next``
    sorts out why).
    """
    endpoint_id = candidate.endpoint_id
    pending, older, endpoint = Delivery.alias(), Delivery.alias(), Endpoint.alias()
    now = utcnow()
    return bool(
        Delivery.update(status=DeliveryStatus.PENDING, next_attempt_at=now, enqueued_at=None, updated_at=now)
        .where(
            (Delivery.id == candidate.id)
            & (Delivery.status == DeliveryStatus.PARKED)
            & (Delivery.attempts == candidate.attempts)
            & ~fn.EXISTS(
                pending.select(pending.id).where((pending.endpoint == endpoint_id)
                                                 & (pending.status == DeliveryStatus.PENDING) & ~pending.fallback)
            )
            & ~fn.EXISTS(
                older.select(older.id).where(
                    (older.endpoint == endpoint_id)
                    & (older.status == DeliveryStatus.PARKED)
                    & (older.created_at <= candidate.created_at)  # an index range: nothing to scan
                    & ((older.created_at < candidate.created_at) | (older.id < candidate.id))
                )
            )
            & fn.EXISTS(
                endpoint.select(endpoint.id).where(
                    (endpoint.id == endpoint_id)
                    & (endpoint.health == presence.RECOVERING)
                    & (endpoint.disabled == False)  # noqa: E712
                    & endpoint.deleted_at.is_null()
                )
            )
        )
        .execute()
    )


@retrying
def disable_failing(disable_after: float) -> int:
    """Disable endpoints that have failed without a single success for ``disable_after`` seconds."""
    cutoff = utcnow() - timedelta(seconds=disable_after)
    stale = Endpoint.select(Endpoint.id).where(
        (Endpoint.disabled == False) & Endpoint.deleted_at.is_null() & (Endpoint.failing_since < cutoff)  # noqa: E712
    )
    count = 0
    for row in stale:
        with write():
            endpoint = locking(Endpoint.select().where(Endpoint.id == row.id)).get()
            if endpoint.disabled or endpoint.failing_since is None or endpoint.failing_since >= cutoff:
                continue
            since = endpoint.failing_since.isoformat(timespec="seconds") + "Z"
            presence.disable(endpoint, f"failing with no success since {since}", utcnow())
            count += 1
    return count
