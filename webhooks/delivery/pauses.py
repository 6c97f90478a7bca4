"""Waiting on the event loop: a pause that a stop cuts short, and the backoff between tries of something down.

Every wait of the engine's own (between broker sessions, while the database is down,
between housekeeping rounds and backlog scans) goes through ``sleep_unless_stopping``,
so a stop is never held up by one of them.
"""

from __future__ import annotations

import asyncio

#: The first pause after a failed try of a broker or database that is down (seconds) ...
FIRST_BACKOFF_SECONDS = 0.5
#: ... doubled after each failure, up to this.
MAX_BACKOFF_SECONDS = 10.0


async def sleep_unless_stopping(stopping: asyncio.Event, seconds: float) -> bool:
    """Wait ``seconds``, or less if ``stopping`` is set meanwhile; whether it is set."""
    try:
        await asyncio.wait_for(stopping.wait(), seconds)
    except asyncio.TimeoutError:
        return False
    return True


class Backoff:
    """Pauses between tries: ``FIRST_BACKOFF_SECONDS``, doubling to ``MAX_BACKOFF_SECONDS``; ``reset`` after a success."""

    __slots__ = ("seconds",)

    def __init__(self) -> None:
        self.seconds = FIRST_BACKOFF_SECONDS

    def reset(self) -> None:
        self.seconds = FIRST_BACKOFF_SECONDS

    async def wait(self, stopping: asyncio.Event) -> bool:
        """Sleep the current pause (a stop cuts it short), then double it; whether a stop came."""
        stopped = await sleep_unless_stopping(stopping, self.seconds)
        self.seconds = min(self.seconds * 2, MAX_BACKOFF_SECONDS)
        return stopped
