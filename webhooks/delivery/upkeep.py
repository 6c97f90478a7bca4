"""The engine's housekeeping, once a second: paces, long lanes, windows on show, the ceiling's share.

- each lane's pace (messages settled per second, smoothed) is measured, the bound on
  waiting messages is shared again among the lanes with a backlog, and lanes that hold
  more than they keep (``spill.Spiller.keep``) move the rest to the database, while lanes
  with a backlog there that run short fetch it back;
- windows that changed are written for the API, the console and /metrics;
- ``ENDPOINT_MAX_IN_FLIGHT`` is the ceiling for an endpoint across all workers: each
  worker takes an equal share, re-reading how many consume the primary queue;
- lanes idle for ``FORGET_AFTER_SECONDS`` are dropped (their window starts afresh).
"""

from __future__ import annotations

import logging
import math
import os
import socket

from webhooks.storage import endpoint_windows
from webhooks.delivery.pauses import sleep_unless_stopping
from webhooks.delivery.runtime import Runtime
from webhooks.delivery.spill import Spiller

log = logging.getLogger(__name__)

#: Seconds between housekeeping rounds.
TICK_SECONDS = 1.0

#: Windows are written at most this often (seconds).
SAVE_EVERY_SECONDS = 2.0

#: How often the number of workers is re-read to share the ceiling (seconds): a passive declare each
#: time; a worker that joins is counted by the others within this long, and until then each may call
#: an endpoint up to the share it had.
SHARE_EVERY_SECONDS = 2.0

#: A lane with nothing to do for this long is dropped (seconds).
FORGET_AFTER_SECONDS = 300.0

#: How often the worker logs what it holds (seconds).
REPORT_EVERY_SECONDS = 10.0


def worker_name() -> str:
    """``host:pid``: which worker a window belongs to."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Upkeep:
    def __init__(self, runtime: Runtime, spiller: Spiller, max_in_flight: int) -> None:
        self.rt = runtime
        self.spiller = spiller
        self.max_in_flight = max_in_flight
        self.worker = worker_name()
        self._saved: dict[str, tuple[int, int, int]] = {}
        self._last_save = 0.0
        self._last_full = -math.inf
        self._last_share = -math.inf
        self._last_report = 0.0

    async def run(self) -> None:
        """Until the engine stops."""
        while not await sleep_unless_stopping(self.rt.stopping, TICK_SECONDS):
            try:
                await self.tick()
            except Exception:  # noqa: BLE001 - housekeeping must not stop the engine
                log.warning("worker housekeeping failed", exc_info=True)

    async def tick(self) -> None:
        now = self.rt.loop.time()
        for lane in self.rt.lanes:
            lane.measure_pace(now, TICK_SECONDS)
        self.spiller.reshare()
        self.spiller.spill_long_lanes()
        self.spiller.refill_short_lanes()
        self.rt.lanes.forget_idle(now, FORGET_AFTER_SECONDS)
        if now - self._last_share >= SHARE_EVERY_SECONDS and self.rt.broker.session is not None:
            self._last_share = now
            await self.share_ceiling()
        if now - self._last_report >= REPORT_EVERY_SECONDS:
            self._last_report = now
            self.report()
        if now - self._last_save >= SAVE_EVERY_SECONDS:
            self._last_save = now
            await self.save_windows()

    def report(self) -> None:
        """One line on what this worker holds: calls under way, messages waiting, lanes with a backlog."""
        lanes = self.rt.lanes
        if not lanes.under_way and not lanes.held:
            return
        spilled = sum(1 for lane in lanes if lane.spilled)
        log.info("worker: %d deliveries under way, %d messages waiting in %d lanes (each keeps up to %d), "
                 "%d endpoints with a backlog in the database", lanes.under_way, lanes.held,
                 sum(1 for lane in lanes if lane.queue), self.spiller.share, spilled)

    async def share_ceiling(self) -> None:
        """This worker's share of ``ENDPOINT_MAX_IN_FLIGHT`` (each endpoint's ceiling across workers)."""
        session = self.rt.broker.session
        if session is None:
            return
        try:
            workers = max(1, await session.workers(self.rt.settings.topology.primary))
        except Exception:  # noqa: BLE001 - keep the current share until the broker answers
            return
        share = max(1, math.ceil(self.max_in_flight / workers))
        if share != self.rt.lanes.ceiling:
            log.info("%d workers consume: each endpoint gets up to %d calls in flight from this one", workers, share)
            self.rt.lanes.set_ceiling(share)

    async def save_windows(self) -> None:
        """Write the windows that changed; all of them every half ``FRESH_SECONDS``, so they stay live."""
        now = self.rt.loop.time()
        current = {lane.endpoint_id: (lane.window.size, lane.window.ceiling, lane.window.in_flight) for lane in self.rt.lanes}
        full = now - self._last_full >= endpoint_windows.FRESH_SECONDS / 2
        rows = [(endpoint_id, *state) for endpoint_id, state in current.items()
                if full or self._saved.get(endpoint_id) != state]
        forgotten = [endpoint_id for endpoint_id in self._saved if endpoint_id not in current]
        if rows or forgotten:
            await self.rt.db.run(endpoint_windows.save, self.worker, rows, forgotten)
        if full:
            self._last_full = now
        self._saved = current

    async def forget(self) -> None:
        """The engine stops: its windows no longer count."""
        try:
            await self.rt.db.run(endpoint_windows.forget_worker, self.worker)
        except Exception:  # noqa: BLE001 - they expire by themselves
            log.debug("could not remove this worker's windows", exc_info=True)
