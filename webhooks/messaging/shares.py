"""Which tenants publish far beyond their share: their new deliveries go to the bulk queue.

A web process counts each tenant's new deliveries over about the last second (a count
that decays with ``SHARE_WINDOW_SECONDS``). A tenant above ``BULK_AFTER`` of them is
flooding: the background enqueuer publishes its deliveries to ``Topology.bulk`` instead
of the primary queue. Workers consume both on connections of their own, so the primary
queue, and the stream of messages a worker has been handed but not yet read, stay short
for every other tenant, whatever the flood's fan-out (``docs/architecture.md``, "A
flood's own queue"). An ordinary tenant (an event every few milliseconds, fanned out to a
few endpoints) stays far below it.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Callable, Iterable, Mapping

from webhooks.turns import SHARE_WINDOW_SECONDS

#: New deliveries a tenant may publish from one web process within about ``SHARE_WINDOW_SECONDS``
#: before the next ones go to the bulk queue: half of what ``TENANT_SHARED_DELIVERY_RATE`` lets a
#: flooding tenant make a second by default, and 25 times a tenant posting an event every 100 ms.
BULK_AFTER = 250

#: Counts that decayed below this are forgotten (once the table holds ``FORGET_ABOVE`` tenants).
FORGET_BELOW = 1.0
FORGET_ABOVE = 1_000


class RecentShares:
    """Each tenant's recent deliveries, decaying over ``window`` seconds; thread-safe."""

    def __init__(self, bulk_after: float = BULK_AFTER, window: float = SHARE_WINDOW_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.bulk_after, self.window, self.clock = bulk_after, window, clock
        self._counts: dict[str, tuple[float, float]] = {}  # tenant -> (count, when)
        #: Until when the highest count added so far stays above ``bulk_after`` (decaying, nothing more added).
        self._someone_over_until = -math.inf
        self._lock = threading.Lock()

    def _now_count(self, tenant: str, now: float) -> float:
        count, when = self._counts.get(tenant, (0.0, now))
        return count * math.exp(-(now - when) / self.window)

    def add(self, counts: Mapping[str, int]) -> None:
        """Count new deliveries, by tenant."""
        now = self.clock()
        with self._lock:
            for tenant, n in counts.items():
                count = self._now_count(tenant, now) + n
                self._counts[tenant] = (count, now)
                if count > self.bulk_after:
                    over_for = self.window * math.log(count / self.bulk_after)
                    self._someone_over_until = max(self._someone_over_until, now + over_for)
            if len(self._counts) > FORGET_ABOVE:
                self._counts = {tenant: (count, when) for tenant, (count, when) in self._counts.items()
                                if count * math.exp(-(now - when) / self.window) >= FORGET_BELOW}

    def anyone_over(self) -> bool:
        """Is any tenant above its share now (a flood is being accepted here)? One comparison, not
        a walk over every tenant counted: it is asked on every request."""
        return self.clock() < self._someone_over_until

    def over(self, tenants: Iterable[str]) -> frozenset[str]:
        """Those of ``tenants`` above their share now: their deliveries go to the bulk queue."""
        now = self.clock()
        with self._lock:
            return frozenset(tenant for tenant in set(tenants) if self._now_count(tenant, now) > self.bulk_after)
