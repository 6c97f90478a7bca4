"""What the clock does for endpoints that were away: release, probe, and give up.

- ``release_parked``: a recovering endpoint gets its parked deliveries back in the order
  their events were created, one at a time (the next once the previous is done, so
  they also *arrive* in order) and at most ``RELEASE_RATE`` per second, then goes ``online``.
- ``promote_probes``: an offline endpoint whose probe finished gets a new probe, the
  oldest parked delivery, so somebody keeps knocking.
- ``disable_failing``: an endpoint failing with no success for ``DISABLE_AFTER`` is disabled.

A released delivery is marked ``pending`` with an empty outbox mark in the same
transaction that takes it out of ``parked``: a crash before the publish leaves it to
the relay, and the status guard means it is never released twice.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from webhooks import presence
from webhooks.db import locking, retrying, write
from webhooks.messages import DeliveryMessage
from webhooks.models import Delivery, Endpoint, Event
from webhooks.outbox import enqueue, message_for
from webhooks.publisher import Publisher
from webhooks.timeutil import utcnow
from webhooks.topology import Topology

log = logging.getLogger(__name__)


def _live_endpoints(health: str) -> list[str]:
    query = Endpoint.select(Endpoint.id).where(
        (Endpoint.health == health) & (Endpoint.disabled == False) & Endpoint.deleted_at.is_null()  # noqa: E712
    )
    return [row.id for row in query]


def _releasing(endpoint_id: str) -> bool:
    """A released delivery has not been attempted yet: the next waits for it (arrival order)."""
    return Delivery.select().where((Delivery.endpoint == endpoint_id) & (Delivery.status == "pending")).exists()


def _unpark(endpoint_id: str, limit: int) -> list[DeliveryMessage]:
    """Take up to ``limit`` oldest parked deliveries out of ``parked`` (in the caller's transaction)."""
    rows = list(
        Delivery.select(Delivery, Event)
        .join(Event)
        .where((Delivery.endpoint == endpoint_id) & (Delivery.status == "parked"))
        .order_by(Delivery.created_at, Delivery.id)
        .limit(limit)
    )
    if not rows:
        return []
    now = utcnow()
    (
        Delivery.update(status="pending", next_attempt_at=now, enqueued_at=None, updated_at=now)
        .where(Delivery.id.in_([row.id for row in rows]) & (Delivery.status == "parked"))
        .execute()
    )
    return [message_for(row, row.event) for row in rows]


class Releaser:
    """Paces releases per endpoint with a token bucket kept by this clock process."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self._credit: dict[str, float] = {}
        self._last = time.monotonic()

    @retrying
    def release_parked(self, publisher: Publisher, topology: Topology) -> int:
        """One pass; returns how many deliveries were released."""
        now_mono = time.monotonic()
        elapsed, self._last = now_mono - self._last, now_mono
        released = 0
        for endpoint_id in _live_endpoints(presence.RECOVERING):
            credit = min(1.0, self._credit.get(endpoint_id, 0.0) + elapsed * self.rate)
            self._credit[endpoint_id] = credit
            if credit < 1.0 or _releasing(endpoint_id):
                continue
            with write():
                endpoint = locking(Endpoint.select().where(Endpoint.id == endpoint_id)).get()
                if endpoint.health != presence.RECOVERING or endpoint.disabled:
                    continue
                messages = _unpark(endpoint_id, 1)
                if not messages:
                    presence.change(endpoint, presence.ONLINE, "every parked delivery was released", utcnow(),
                                    health=presence.ONLINE)
            self._credit[endpoint_id] = credit - len(messages)
            if messages:
                enqueue(publisher, topology, messages)
                released += len(messages)
        return released


@retrying
def promote_probes(publisher: Publisher, topology: Topology) -> int:
    """Give each offline endpoint whose probe has finished a new one; returns how many."""
    promoted = 0
    for endpoint_id in _live_endpoints(presence.OFFLINE):
        with write():
            endpoint = locking(Endpoint.select().where(Endpoint.id == endpoint_id)).get()
            probe = Delivery.get_or_none(Delivery.id == endpoint.probe_delivery_id) if endpoint.probe_delivery_id else None
            if probe is not None and probe.status in ("pending", "retrying"):
                continue
            messages = _unpark(endpoint_id, 1)
            if not messages:
                continue
            Endpoint.update(probe_delivery_id=messages[0].delivery_id).where(Endpoint.id == endpoint_id).execute()
        enqueue(publisher, topology, messages)
        log.info("probe endpoint=%s delivery=%s", endpoint_id, messages[0].delivery_id)
        promoted += 1
    return promoted


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
