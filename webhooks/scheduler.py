"""Per-endpoint fair scheduling of the worker's delivery threads.

At most ``per_endpoint`` jobs of one endpoint run at a time in this process, a few
more wait in memory, and beyond that ``submit`` refuses (the caller sends the message
back through the broker's defer queue). So a burst for one endpoint cannot take every
thread, a backlog for a fast endpoint flows without round trips through the broker,
and the prefetch window keeps room for everybody else's messages.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Executor
from typing import Callable

Job = Callable[[], None]


class EndpointScheduler:
    def __init__(self, executor: Executor, per_endpoint: int, hold: int) -> None:
        self.executor = executor
        self.per_endpoint = per_endpoint
        self.hold = hold
        self._lock = threading.Lock()
        self._running: dict[str, int] = {}
        self._waiting: dict[str, deque[Job]] = {}

    def submit(self, key: str | None, job: Job) -> bool:
        """Run ``job`` now, or later in arrival order; False if this endpoint's line is full."""
        if key is None:
            self.executor.submit(job)
            return True
        with self._lock:
            if self._running.get(key, 0) < self.per_endpoint:
                self._running[key] = self._running.get(key, 0) + 1
            elif len(self._waiting.setdefault(key, deque())) < self.hold:
                self._waiting[key].append(job)
                return True
            else:
                return False
        self.executor.submit(self._run, key, job)
        return True

    def _run(self, key: str, job: Job) -> None:
        while True:
            try:
                job()
            finally:
                with self._lock:
                    waiting = self._waiting.get(key)
                    following = waiting.popleft() if waiting else None
                    if following is None:
                        self._running[key] -= 1
                        if not self._running[key]:
                            del self._running[key]
                            self._waiting.pop(key, None)
            if following is None:
                return
            job = following  # same thread, same slot: the next in line for this endpoint

    def load(self, key: str) -> tuple[int, int]:
        """(running, waiting) for ``key`` (tests, metrics)."""
        with self._lock:
            return self._running.get(key, 0), len(self._waiting.get(key, ()))
