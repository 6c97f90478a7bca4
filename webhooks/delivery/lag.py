"""How late the event loop runs things now: time that calls seem to take through no fault of the receiver.

A busy loop (thousands of calls in flight, a burst of messages to parse) answers a
receiver's response a little later than it arrived; a window that counted that delay
against the receiver would shrink exactly when the worker is busiest. ``LoopLag``
measures the loop's own delay with a timer that should fire every ``PROBE_SECONDS``,
keeps a fading maximum of it, and windows allow that much on top of a receiver's usual
latency. A stall that is still going on when a call is judged (the probe has not run
since) counts too: ``allowance(now)`` includes the time since the probe last ran.
"""

from __future__ import annotations

import asyncio

#: The probe timer's period (seconds).
PROBE_SECONDS = 0.02

#: A call needs several turns of the loop (its connection, its request, the answer's
#: headers, its body), each as late as the loop runs: its latency may grow by this many lags.
TURNS_PER_CALL = 5

#: Each probe keeps this share of the allowance measured before (a peak fades in about a second).
DECAY = 0.95


class LoopLag:
    def __init__(self) -> None:
        #: The fading maximum of the probe's lateness (seconds).
        self.recent = 0.0
        #: Loop time the probe last ran (None: not yet).
        self.last_tick: float | None = None

    def observe(self, late: float, now: float) -> None:
        """The probe fired ``late`` seconds after its time, at ``now``."""
        self.recent = max(late, self.recent * DECAY)
        self.last_tick = now

    def allowance(self, now: float) -> float:
        """Seconds by which a call judged at ``now`` may seem slower because of the loop itself."""
        stalled = 0.0 if self.last_tick is None else max(0.0, now - self.last_tick - PROBE_SECONDS)
        return max(self.recent * TURNS_PER_CALL, stalled)

    async def measure(self, stopping: asyncio.Event) -> None:
        """Until ``stopping`` is set: one probe every ``PROBE_SECONDS``."""
        loop = asyncio.get_running_loop()
        while not stopping.is_set():
            due = loop.time() + PROBE_SECONDS
            await asyncio.sleep(PROBE_SECONDS)
            now = loop.time()
            self.observe(max(0.0, now - due), now)
