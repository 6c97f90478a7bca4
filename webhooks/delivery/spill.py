"""Where a waiting backlog lives: in memory up to a bound, in the database beyond it.

Memory is where waiting is cheapest: a message held in its lane costs nothing while
its endpoint is busy, and goes out the moment a window slot frees. But the broker only
hands a worker ``WORKER_PREFETCH`` unacknowledged messages, and whatever sits behind a
flood in the queue waits until the worker has room for more. So when a process's
messages (waiting and in flight) come near its prefetch, or a lane holds more than
``HOLD_SECONDS`` of its own pace, the newest messages of the longest lanes go to the
database (``webhooks.delivery.backlog.spill``) and are acked: the queue keeps moving for every
other tenant and endpoint, and memory stays bounded. A lane
with a backlog in the database fetches it back, oldest first, whenever it runs short;
every worker also looks for backlogs nobody is fetching (a worker that died) every
``ORPHAN_SCAN_SECONDS``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Sequence

from webhooks.delivery import backlog
from webhooks.delivery.lanes import Held, Lane
from webhooks.delivery.runtime import Runtime, Stopping
from webhooks.messaging.messages import DeliveryMessage

log = logging.getLogger(__name__)

#: A lane keeps in memory at most about this many seconds of its own pace ...
HOLD_SECONDS = 30.0
#: ... and never fewer than this many messages (enough for a window that grows).
MIN_KEEP = 200

#: Share of ``WORKER_PREFETCH`` at which a process spills, and the share it spills down to.
SPILL_ABOVE = 0.9
SPILL_DOWN_TO = 0.7

#: Spilled deliveries fetched back at a time.
REFILL_BATCH = 200

#: How often every worker looks for backlogs in the database that nobody is fetching (seconds).
ORPHAN_SCAN_SECONDS = 5.0


class Spiller:
    def __init__(self, runtime: Runtime, prefetch: int) -> None:
        self.rt = runtime
        #: Above ``high`` messages in this process (waiting and in flight), spill down to ``low``.
        self.high = max(int(prefetch * SPILL_ABOVE), 1)
        self.low = max(int(prefetch * SPILL_DOWN_TO), 1)
        self._spilling = False
        self._refilling: set[str] = set()

    # -- out to the database ------------------------------------------------------------------

    def keep(self, lane: Lane) -> int:
        """How many waiting messages ``lane`` keeps in memory."""
        return max(MIN_KEEP, 2 * lane.window.size, int(lane.pace * HOLD_SECONDS))

    def check(self) -> None:
        """After messages came in: spill if this process is near its prefetch."""
        busy = len(self.rt.tasks)  # messages being handled (and a few chores)
        if self.rt.lanes.held + busy > self.high and not self._spilling:
            self._spilling = True
            self.rt.spawn(self._spill_to(max(self.low - busy, 0)))

    def spill_long_lanes(self) -> None:
        """Spill what lanes hold beyond ``keep`` (a slow or rate-limited endpoint's backlog)."""
        if self._spilling:
            return
        excess = [(lane, len(lane.queue) - self.keep(lane)) for lane in self.rt.lanes if len(lane.queue) > self.keep(lane)]
        if excess:
            self._spilling = True
            self.rt.spawn(self._spill([(lane, count) for lane, count in excess]))

    async def _spill_to(self, target: int) -> None:
        plan: list[tuple[Lane, int]] = []
        surplus = self.rt.lanes.held - target
        for lane in self.rt.lanes.longest():
            if surplus <= 0:
                break
            count = min(surplus, len(lane.queue) - min(self.keep(lane), len(lane.queue) // 2))
            if count > 0:
                plan.append((lane, count))
                surplus -= count
        await self._spill(plan)

    async def _spill(self, plan: Sequence[tuple[Lane, int]]) -> None:
        try:
            taken = [(lane, held) for lane, count in plan for held in self.rt.lanes.take_newest(lane, count)]
            if not taken:
                return
            messages = [held.message for _, held in taken]
            try:
                marked = await self.rt.until_db(self._run_spill, messages)
            except Stopping:
                for _, held in taken:
                    self.rt.requeue(held.tag, held.session)
                return
            for (lane, held), was_marked in zip(taken, marked):
                if was_marked:
                    lane.spilled = True
                self.rt.ack(held.tag, held.session)  # spilled, or stale anyway
            log.info("moved %d waiting messages of %d endpoints to the database", sum(marked),
                     len({lane.endpoint_id for lane, _ in taken}))
        finally:
            self._spilling = False

    async def _run_spill(self, messages: list[DeliveryMessage]) -> list[bool]:
        return await self.rt.in_db(backlog.spill, messages)

    # -- back from the database ---------------------------------------------------------------

    def after_settled(self, held: Held) -> None:
        """A message of ``held.lane`` is done: fetch its backlog back if the lane runs short."""
        lane = held.lane
        lane.finished += 1
        if lane.spilled and len(lane.queue) < self.keep(lane) // 2:
            self.refill(lane.endpoint_id, lane)

    def refill(self, endpoint_id: str, lane: Lane | None) -> None:
        if endpoint_id in self._refilling or self.rt.stopping.is_set():
            return
        self._refilling.add(endpoint_id)
        self.rt.spawn(self._refill(endpoint_id, lane))

    async def _refill(self, endpoint_id: str, lane: Lane | None) -> None:
        try:
            messages = await self.rt.in_db(backlog.take_spilled, endpoint_id, REFILL_BATCH)
            if lane is not None and len(messages) < REFILL_BATCH:
                lane.spilled = False
            if not messages:
                return
            primary = self.rt.settings.topology.primary
            confirmed = await asyncio.gather(*(self.rt.publish(primary, *m.encode()) for m in messages))
            refused = [m for m, ok in zip(messages, confirmed) if not ok]
            if refused:
                log.warning("%d deliveries fetched back from the database were not confirmed; the relay publishes them",
                            len(refused))
                await self.rt.in_db(backlog.unmark, refused)
        except Exception:  # noqa: BLE001 - what was taken and not published is the relay's or the sweep's
            log.warning("fetching back the backlog of endpoint=%s failed", endpoint_id, exc_info=True)
        finally:
            self._refilling.discard(endpoint_id)

    async def scan_orphans(self) -> None:
        """Forever: fetch back backlogs in the database that no lane here is fetching."""
        while not self.rt.stopping.is_set():
            try:
                await asyncio.wait_for(self.rt.stopping.wait(), ORPHAN_SCAN_SECONDS)
                return
            except asyncio.TimeoutError:
                pass
            if self.rt.session is None:
                continue
            try:
                endpoints = await self.rt.in_db(backlog.spilled_endpoints)
            except Exception:  # noqa: BLE001 - the database may be down: the next scan tries again
                log.debug("backlog scan failed", exc_info=True)
                continue
            for endpoint_id in endpoints:
                lane = self.rt.lanes.lanes.get(endpoint_id)
                if lane is None or len(lane.queue) < self.keep(lane) // 2:
                    self.refill(endpoint_id, lane)
