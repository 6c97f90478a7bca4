"""Where a waiting backlog lives: in memory up to a bound, in the database beyond it.

Memory is where waiting is cheapest: a message held in its lane costs nothing while
its endpoint is busy, and goes out the moment a window slot frees. But the broker only
hands a worker ``WORKER_PREFETCH`` unacknowledged messages, and whatever sits behind a
flood in the queue waits until the worker has room for more. So the messages waiting
in lanes are bounded apart from the calls in flight (``budget.Budget.hold``, and what the
calls in flight leave unused of their own share: ``Spiller.high``): above it,
the newest messages of the longest lanes go to the database
(``webhooks.delivery.backlog.spill``) and are acked, and the queue keeps moving for every
other tenant and endpoint while memory stays bounded. Calls in flight have a share of
the prefetch of their own, so they never push out the messages waiting within ``hold``.

Each lane keeps at most ``keep`` messages waiting: enough to feed its window until a
fetch from the database comes back (``MIN_KEEP``, twice its window, or ``HOLD_SECONDS``
of its own pace; all of its share until that pace is measured), but never more than its
share of the bound among the lanes that have a backlog, so that lanes at their ``keep``
never add up to a spill, and what one lane spills is not fetched straight back by
another. A lane with a backlog in the database takes it back, oldest first, when it runs
short, no more than it needs (``need``), straight into the lane:
``backlog.take_spilled`` hides what it took from other workers for a while,
and the attempts clear that when they are recorded. (They used to be published to the
primary queue again: a second trip through the broker for every message of a backlog,
a fifth of the worker's time with 6,000 calls in flight, and a wait behind everything
ready in the queue.) Messages taken back and not attempted are given back to the
database when the worker stops or loses its broker session. Every worker also looks
for backlogs nobody holds (a worker that died) every ``ORPHAN_SCAN_SECONDS``.
"""

from __future__ import annotations

import logging
from typing import Sequence

from webhooks.delivery import backlog
from webhooks.delivery.lane import Held, Lane
from webhooks.delivery.pauses import sleep_unless_stopping
from webhooks.delivery.database_work import Stopping
from webhooks.delivery.runtime import Runtime
from webhooks.messaging.messages import DeliveryMessage

log = logging.getLogger(__name__)

#: A lane keeps in memory at most about this many seconds of its own pace ...
HOLD_SECONDS = 30.0
#: ... and never fewer than this many messages (enough for a window that grows).
MIN_KEEP = 200

#: Above the hold bound a process spills down to this share of it (lanes share this much).
SPILL_DOWN_TO = 0.8

#: A lane's share of the bound is never below this many messages.
MIN_SHARE = 8

#: Messages moved to the database in one statement.
SPILL_BATCH = 2000

#: Spilled deliveries fetched back at a time, at most.
REFILL_BATCH = 200

#: How often every worker looks for backlogs in the database that nobody is fetching (seconds).
ORPHAN_SCAN_SECONDS = 5.0


class Spiller:
    def __init__(self, runtime: Runtime, hold: int, lendable: int = 0) -> None:
        self.rt = runtime
        self.hold = max(hold, 1)
        #: The share of the prefetch for calls in flight (``budget.Budget.in_flight``): what calls
        #: do not use of it, waiting messages may (``high``).
        self.lendable = lendable
        #: What each lane with a backlog may keep waiting (``low`` shared among them; ``reshare``).
        self.share = self.low
        self._spilling = False
        self._refilling: set[str] = set()

    # -- out to the database ------------------------------------------------------------------

    @property
    def high(self) -> int:
        """Above this many messages waiting in this process's lanes, spill down to ``low``: the hold,
        and whatever of the calls' share the calls under way leave unused. Waiting messages and
        calls together never take more than their two shares, so the room for arrivals stays; but
        a backlog that one fast endpoint drains in seconds is not sent to the database and back
        merely because few calls are in flight at once."""
        return self.hold + max(0, self.lendable - self.rt.lanes.under_way)

    @property
    def low(self) -> int:
        return max(int(self.high * SPILL_DOWN_TO), 1)

    def need(self, lane: Lane) -> int:
        """How many waiting messages ``lane`` needs to feed its window until a fetch from the database
        comes back, within its share (a pace not measured yet counts as none)."""
        return min(max(MIN_KEEP, 2 * lane.window.size, int((lane.pace or 0.0) * HOLD_SECONDS)), self.share)

    def keep(self, lane: Lane) -> int:
        """How many waiting messages ``lane`` keeps in memory before the rest is spilled: what it
        needs, or all of its share until its pace is measured (``high`` bounds them all the same):
        a new lane is not judged on the part of a second it has existed."""
        return self.share if lane.pace is None else self.need(lane)

    def reshare(self) -> None:
        """Share the bound among the lanes with a backlog (in memory or in the database) again
        (every housekeeping round)."""
        backlogged = sum(1 for lane in self.rt.lanes if lane.queue or lane.spilled)
        self.share = max(MIN_SHARE, self.low // max(backlogged, 1))

    def check(self) -> None:
        """After messages came in: spill if more wait in this process's lanes than it holds."""
        if self.rt.lanes.held > self.high and not self._spilling:
            self._spilling = True
            self.rt.tasks.spawn(self._spill_to(self.low))

    def spill_long_lanes(self) -> None:
        """Spill what lanes hold beyond ``keep`` (a slow or rate-limited endpoint's backlog)."""
        if self._spilling:
            return
        excess = [(lane, len(lane.queue) - self.keep(lane)) for lane in self.rt.lanes if len(lane.queue) > self.keep(lane)]
        if excess:
            self._spilling = True
            self.rt.tasks.spawn(self._spill([(lane, count) for lane, count in excess]))

    async def _spill_to(self, target: int) -> None:
        await self._spill(list(self.plan(self.rt.lanes.held - target).items()))

    def plan(self, surplus: int) -> dict[Lane, int]:
        """How many of each lane's newest messages to move so that ``surplus`` fewer wait: first what lanes
        hold beyond their ``keep``, then, longest lanes first, down to half what they hold.

        A lane with no more than ``MIN_SHARE`` waiting is never spilled: its messages are a tenant's
        next ones (the first behind another's flood), and nothing would fetch them back before the
        orphan scan. Memory stays bounded by the prefetch all the same.
        """
        lanes = self.rt.lanes.longest()
        plan: dict[Lane, int] = {}
        for floor in (self.keep, _half):
            for lane in lanes:
                if surplus <= 0:
                    return plan
                count = min(surplus, len(lane.queue) - plan.get(lane, 0) - floor(lane))
                if count > 0:
                    plan[lane] = plan.get(lane, 0) + count
                    surplus -= count
        return plan

    async def _spill(self, plan: Sequence[tuple[Lane, int]]) -> None:
        try:
            taken = [(lane, held) for lane, count in plan for held in self.rt.lanes.take_newest(lane, count)]
            for start in range(0, len(taken), SPILL_BATCH):
                if not await self._spill_batch(taken[start:start + SPILL_BATCH]):
                    self.rt.give_back(held for _, held in taken[start + SPILL_BATCH:])
                    return
        finally:
            self._spilling = False

    async def _spill_batch(self, taken: Sequence[tuple[Lane, Held]]) -> bool:
        """Move ``taken`` to the database and ack them; False when the worker stopped first (they were given back)."""
        messages = [held.message for _, held in taken]
        try:
            marked = await self.rt.db.until_up(self._run_spill, messages)
        except Stopping:
            self.rt.give_back(held for _, held in taken)
            return False
        for (lane, held), was_marked in zip(taken, marked):
            if was_marked:
                lane.spilled = True
            held.ack()  # spilled, or stale anyway
        log.info("moved %d waiting messages of %d endpoints to the database", sum(marked),
                 len({lane.endpoint_id for lane, _ in taken}))
        return True

    async def _run_spill(self, messages: list[DeliveryMessage]) -> list[bool]:
        return await self.rt.db.run(backlog.spill, messages)

    # -- back from the database ---------------------------------------------------------------

    def after_settled(self, held: Held) -> None:
        """A message of ``held.lane`` is done: fetch its backlog back if the lane runs short."""
        lane = held.lane
        if lane.spilled:
            self.refill(lane.endpoint_id, lane)

    def refill_short_lanes(self) -> None:
        """Fetch back the backlogs of lanes that run short (every housekeeping round): a lane with
        nothing under way has no delivery settling to remind it."""
        for lane in list(self.rt.lanes):
            if lane.spilled:
                self.refill(lane.endpoint_id, lane)

    def short(self, lane: Lane) -> int:
        """How many messages ``lane`` should take back now: none until what it has waiting falls below
        half its ``need``, then enough to make it up (at most ``REFILL_BATCH``)."""
        has = len(lane.queue)
        need = self.need(lane)
        return min(need - has, REFILL_BATCH) if has < need // 2 else 0

    def refill(self, endpoint_id: str, lane: Lane | None) -> None:
        """Fetch back some of the endpoint's backlog if its lane (None: it has none here) runs short."""
        count = REFILL_BATCH if lane is None else self.short(lane)
        if count <= 0 or endpoint_id in self._refilling or self.rt.stopping.is_set():
            return
        self._refilling.add(endpoint_id)
        self.rt.tasks.spawn(self._refill(endpoint_id, lane, count))

    async def _refill(self, endpoint_id: str, lane: Lane | None, count: int) -> None:
        rt = self.rt
        try:
            messages = await rt.db.run(backlog.take_spilled, endpoint_id, count)
        except Exception:  # noqa: BLE001 - the backlog stays where it is; the next short lane or scan asks again
            log.warning("taking back the backlog of endpoint=%s failed", endpoint_id, exc_info=True)
            return
        finally:
            self._refilling.discard(endpoint_id)
        if lane is not None and len(messages) < count:
            lane.spilled = False
        if not messages:
            return
        session = rt.broker.session
        if rt.stopping.is_set() or session is None or not session.is_open:
            rt.db.return_backlog(messages)  # its lanes are emptied meanwhile
            return
        now = rt.loop.time()
        for message in messages:
            rt.lanes.add(message, None, now)
        if lane is None and len(messages) == count:  # an orphaned backlog: more of it waits
            rt.lanes.lanes[endpoint_id].spilled = True
        rt.wake()

    async def scan_orphans(self) -> None:
        """Forever: fetch back backlogs in the database that no lane here is fetching."""
        while not await sleep_unless_stopping(self.rt.stopping, ORPHAN_SCAN_SECONDS):
            if self.rt.broker.session is None:
                continue
            try:
                endpoints = await self.rt.db.run(backlog.spilled_endpoints)
            except Exception:  # noqa: BLE001 - the database may be down: the next scan tries again
                log.debug("backlog scan failed", exc_info=True)
                continue
            for endpoint_id in endpoints:
                lane = self.rt.lanes.lanes.get(endpoint_id)
                if lane is not None:
                    lane.spilled = True  # (a backlog it did not know of: another worker's)
                self.refill(endpoint_id, lane)


def _half(lane: Lane) -> int:
    """What a lane keeps when the bound must be met beyond every lane's ``keep``."""
    return max(len(lane.queue) // 2, MIN_SHARE)
