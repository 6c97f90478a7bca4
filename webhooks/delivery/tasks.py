"""The engine's tasks: every delivery and chore it starts, so that a stop waits for all of them."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable

log = logging.getLogger(__name__)


class TaskSet:
    """Tasks started on the event loop and not finished yet (each delivery owns one Held until it is settled)."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, coroutine: Awaitable[Any]) -> asyncio.Task[Any]:
        """Run ``coroutine`` as a tracked task (the engine waits for these before it exits)."""
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("unexpected error in the worker", exc_info=task.exception())

    async def finish(self) -> None:
        """Wait for every task, and for the tasks they start meanwhile (giving back a backlog taken
        from the database, a dead-letter copy)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
