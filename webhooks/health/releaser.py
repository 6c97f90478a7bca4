"""The paced release of parked deliveries: the clock's release thread runs ``Releaser``.

A recovering endpoint gets its parked deliveries back in the order their events were
created, strictly one at a time (the next only once the previous is no longer
``pending``, i.e. its attempt was made, so they also *arrive* in order) and at most
``RELEASE_RATE`` per second, then goes ``online``. The release thread looks again as
soon as there can be something to do: right after the released delivery is expected to
be done (then every ``POLL_SECONDS``), at the endpoint's next rate slot, or every
``IDLE_SECONDS`` while nothing recovers. So the drain is limited by ``RELEASE_RATE``
and the round trip of one delivery, not by a clock tick. The release steps themselves
(and their guards) are in ``webhooks.health.recovery``.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Callable, Iterable

from webhooks.health import presence
from webhooks.messaging.messages import DeliveryMessage
from webhooks.storage.models import Delivery
from webhooks.messaging.outbox import enqueue, message_for
from webhooks.messaging.publisher import Publisher
from webhooks.health.recovery import Step, live_endpoints, oldest_parked, release_next, unpark_if_next
from webhooks.messaging.topology import Topology
from webhooks.storage.statuses import DeliveryStatus

log = logging.getLogger(__name__)

#: With no endpoint recovering, look for one this often (seconds).
IDLE_SECONDS = 0.1

#: While releasing, re-read which endpoints are recovering at least this often (seconds).
LIST_EVERY_SECONDS = 0.25

#: A released delivery still pending is looked at again this soon (seconds) ...
POLL_SECONDS = 0.001

#: ... backing off to this while it stays pending (a slow endpoint, a worker down).
MAX_POLL_SECONDS = 0.02

#: The first look after a release comes at most this late (seconds); it is learnt per endpoint.
MAX_FIRST_LOOK_SECONDS = 1.0

#: While releasing, say how it goes this often (seconds).
REPORT_EVERY_SECONDS = 10.0

#: Endpoint ids per "which of these have a pending delivery" query.
PENDING_QUERY_CHUNK = 500


def _with_pending(endpoint_ids: Iterable[str]) -> set[str]:
    """Which of ``endpoint_ids`` have a delivery ``pending`` (one indexed read a chunk, no lock); a fallback
    copy does not count (``webhooks.ingest.fallback``)."""
    ids = list(endpoint_ids)
    busy: set[str] = set()
    for start in range(0, len(ids), PENDING_QUERY_CHUNK):
        chunk = ids[start : start + PENDING_QUERY_CHUNK]
        query = (
            Delivery.select(Delivery.endpoint)
            .where(Delivery.endpoint.in_(chunk) & (Delivery.status == DeliveryStatus.PENDING) & ~Delivery.fallback)
            .distinct()
        )
        busy.update(endpoint_id for (endpoint_id,) in query.tuples())
    return busy


@dataclass
class _Lane:
    """What the releaser keeps about one recovering endpoint between passes."""

    #: No release before this (monotonic seconds): ``1 / rate`` after the previous one.
    next_slot: float = -math.inf
    #: A delivery of the endpoint is pending since then (released by us, or found so).
    out_since: float | None = None
    #: Whether a pass has looked at that pending delivery yet.
    looked: bool = False
    #: Seconds after a release at which the first look usually finds the delivery done
    #: (adapted: shorter when it was done already, longer when it was not).
    first_look: float = 0.005
    #: The endpoint's oldest parked delivery, read ahead while the previous one is out.
    candidate: Delivery | None = None


class Releaser:
    """Releases parked deliveries of recovering endpoints, in order, one at a time, paced.

    ``release_parked`` is one pass; ``next_pass_in`` says when the next pass is worth
    making: at an endpoint's next rate slot (``1 / rate`` after its previous release,
    so at most ``rate`` per second and no bursts), or when its pending delivery is
    probably done. When that is is learnt per endpoint: the first look after a release
    comes a little earlier each time it found the delivery done already and a little
    later each time it did not, so about a third of first looks find it still pending;
    after that, every ``POLL_SECONDS`` (slowing down to ``MAX_POLL_SECONDS`` while it
    stays pending). So the next delivery goes out about a millisecond after the
    previous one is done, without polling the database all the while.
    """

    def __init__(self, rate: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.spacing = 1.0 / rate if rate > 0 else math.inf
        self._monotonic = monotonic
        self._lanes: dict[str, _Lane] = {}
        self._listed_at = -math.inf
        self._wake_at = -math.inf
        #: Moving average of the seconds from a release to seeing its delivery done (logged).
        self._turnaround = 0.0
        #: Released since the last progress line (how many, from which endpoints), and when that was.
        self._released = 0
        self._released_from: set[str] = set()
        self._reported_at = monotonic()

    def recovering(self) -> list[str]:
        """The endpoints this releaser is working on (as of its last look)."""
        return list(self._lanes)

    def next_pass_in(self) -> float:
        """Seconds until the next pass can do anything (0: now)."""
        return max(0.0, self._wake_at - self._monotonic())

    def release_parked(self, publisher: Publisher, topology: Topology) -> int:
        """One pass over the recovering endpoints; returns how many deliveries were released.

        While nothing can be released a pass costs one indexed read. The release itself
        is one guarded ``UPDATE`` of the delivery read ahead (``unpark_if_next``), then the
        publish; the outbox mark and reading the next one come after the publish, while
        the worker makes the attempt.
        """
        now = self._monotonic()
        if not self._lanes or now - self._listed_at >= LIST_EVERY_SECONDS:
            self._list(now)
        due = [endpoint_id for endpoint_id, lane in self._lanes.items() if self._due(lane, now)]
        busy = _with_pending(due) if due else set()
        messages: list[DeliveryMessage] = []
        for endpoint_id in due:
            lane = self._lanes[endpoint_id]
            if endpoint_id in busy:
                self._still_pending(lane, now)
                continue
            self._done(lane, now)
            candidate, lane.candidate = lane.candidate, None
            if candidate is not None and unpark_if_next(candidate):
                step, message = Step.RELEASED, message_for(candidate, candidate.event)
            else:
                step, message = release_next(endpoint_id)
            if step is Step.DONE:
                del self._lanes[endpoint_id]
            elif step is Step.BUSY:
                lane.out_since, lane.looked = now, True
            elif message is not None:
                messages.append(message)
                lane.out_since, lane.looked = now, False
                lane.next_slot = now + self.spacing
        if messages:
            enqueue(publisher, topology, messages)  # what is not confirmed is the relay's
            for message in messages:
                if (lane := self._lanes.get(message.endpoint_id)) is not None:
                    lane.candidate = oldest_parked(message.endpoint_id)
        self._released += len(messages)
        self._released_from.update(message.endpoint_id for message in messages)
        now = self._monotonic()
        self._report(now)
        self._plan(now)
        return len(messages)

    def _list(self, now: float) -> None:
        """Re-read which endpoints are recovering; keep what is known about those still are."""
        self._lanes = {endpoint_id: self._lanes.get(endpoint_id) or _Lane()
                       for endpoint_id in live_endpoints(presence.RECOVERING)}
        self._listed_at = now

    def _due(self, lane: _Lane, now: float) -> bool:
        """Whether to look at the lane now: its rate slot is open and its pending delivery
        (if any) may be done."""
        if lane.next_slot > now:
            return False
        return lane.out_since is None or lane.looked or lane.out_since + lane.first_look <= now

    def _still_pending(self, lane: _Lane, now: float) -> None:
        if lane.out_since is None:
            lane.out_since, lane.looked = now, True  # not ours (a clock before us): just wait for it
        elif not lane.looked:
            lane.first_look = min(MAX_FIRST_LOOK_SECONDS, lane.first_look * 1.05)
            lane.looked = True

    def _done(self, lane: _Lane, now: float) -> None:
        """Nothing of the endpoint is pending (any more): learn from how long it took."""
        if lane.out_since is None:
            return
        if not lane.looked and lane.next_slot <= lane.out_since + lane.first_look:
            # Done by the first look (and that look was not held back by the rate): look earlier.
            lane.first_look = max(POLL_SECONDS, lane.first_look * 0.9)
        self._turnaround += 0.1 * (min(now - lane.out_since, 1.0) - self._turnaround)
        lane.out_since, lane.looked = None, False

    def _plan(self, now: float) -> None:
        """Set when the next pass is worth making."""
        if not self._lanes:
            self._wake_at = now + IDLE_SECONDS
            return
        wake = self._listed_at + LIST_EVERY_SECONDS
        for lane in self._lanes.values():
            at = lane.next_slot
            if lane.out_since is not None:
                if lane.looked:  # poll, slowing down the longer it stays pending
                    look = now + min(MAX_POLL_SECONDS, max(POLL_SECONDS, (now - lane.out_since) / 10))
                else:
                    look = lane.out_since + lane.first_look
                at = max(at, look)
            wake = min(wake, at)
        self._wake_at = wake

    def _report(self, now: float) -> None:
        """Log the progress of the release every ``REPORT_EVERY_SECONDS`` while it goes on."""
        elapsed = now - self._reported_at
        if elapsed < REPORT_EVERY_SECONDS:
            return
        if self._released:
            log.info("released %d parked deliveries of %d endpoint(s) in %.0f s (%.1f/s); "
                     "a released delivery was seen done after %.1f ms on average", self._released,
                     len(self._released_from), elapsed, self._released / elapsed, self._turnaround * 1000)
        self._released, self._reported_at = 0, now
        self._released_from.clear()
