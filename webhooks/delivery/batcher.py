"""Group commit for the event loop: many deliveries' database work done as one batch on a thread.

A coroutine awaits ``batcher(item)``; items queue up while a batch runs, and the next
batch takes everything queued (up to ``max_batch``) in one call of ``run`` on the
database executor, so one transaction (one lock round, one WAL flush) serves many
attempts, and a lone item goes at once with no added wait. At most one batch of a
batcher runs at a time. If the batch raises, every item in it gets that exception.

A batcher given a ``share`` key (the tenant) forms each batch by turns: one item of
every key that has some queued, then a second of each, and so on, in the order the
keys first queued. What queues here is the work already handed out by the lanes, and
a flooding tenant can have a thousand items of it waiting; taking turns puts another
tenant's one item into the very next batch (and first in it, so its caller resumes
first) instead of behind the flood.

With ``express`` too, such a tenant does not even wait for the batch running: an item of a
tenant with nothing else queued or running here goes at once in a batch of its own, beside
the running one (one such batch at a time). Under one tenant's flood the big batch takes
tens of milliseconds; another tenant's lone claim then costs one small transaction instead
of waiting for it and for the next.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from concurrent.futures import Executor
from typing import Any, Callable, Generic, Hashable, Sequence, TypeVar

import peewee

from webhooks.turns import in_turns
from webhooks.storage import db

T = TypeVar("T")
R = TypeVar("R")


def database_work(fn: Callable[..., R], *args: Any) -> R:
    """Run ``fn(*args)`` on a database thread: a dead connection is thrown away, a live one
    goes back to the pool between units of work."""
    try:
        return fn(*args)
    except (peewee.OperationalError, peewee.InterfaceError):
        db.reset_connection()  # this thread's connection is dead: the next unit opens a fresh one
        raise
    finally:
        db.release_connection()


class Batcher(Generic[T, R]):
    def __init__(self, run: Callable[[Sequence[T]], Sequence[R]], executor: Executor, max_batch: int = 256,
                 share: Callable[[T], Hashable] | None = None, express: bool = False) -> None:
        if express and share is None:
            raise ValueError("an express batch needs a share key")
        self._run = run
        self._executor = executor
        self._max_batch = max_batch
        self._share = share
        self._express = express
        self._queued: list[tuple[T, asyncio.Future[R]]] = []
        self._running = False
        self._express_running = False
        #: Items of each share key queued or in a running batch (``express`` only).
        self._pending: Counter[Hashable] = Counter()

    async def __call__(self, item: T) -> R:
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        if not self._express:
            self._enqueue(item, future)
            return await future
        assert self._share is not None  # checked in __init__
        key = self._share(item)
        if self._running and not self._express_running and not self._pending[key]:
            self._express_running = True
            self._submit([(item, future)], express=True)
        else:
            self._enqueue(item, future)
        self._pending[key] += 1
        try:
            return await future
        finally:
            self._pending[key] -= 1
            if not self._pending[key]:
                del self._pending[key]

    def _enqueue(self, item: T, future: "asyncio.Future[R]") -> None:
        self._queued.append((item, future))
        if not self._running:
            self._start()

    def _start(self) -> None:
        batch, self._queued = self._next_batch()
        self._running = True
        self._submit(batch, express=False)

    def _submit(self, batch: list[tuple[T, "asyncio.Future[R]"]], express: bool) -> None:
        task = asyncio.get_running_loop().run_in_executor(self._executor, self._execute, [item for item, _ in batch])
        task.add_done_callback(lambda done: self._finish(batch, done, express))

    def _next_batch(self) -> tuple[list[tuple[T, "asyncio.Future[R]"]], list[tuple[T, "asyncio.Future[R]"]]]:
        """The next batch and what stays queued (each in the order it queued)."""
        queued, size = self._queued, self._max_batch
        if self._share is None:
            return queued[:size], queued[size:]
        share = self._share
        return in_turns(queued, lambda entry: share(entry[0]), size)

    def _execute(self, items: list[T]) -> Sequence[R]:
        results = database_work(self._run, items)
        if len(results) != len(items):
            raise RuntimeError(f"batch returned {len(results)} results for {len(items)} items")
        return results

    def _finish(self, batch: list[tuple[T, asyncio.Future[R]]], done: asyncio.Future[Sequence[R]], express: bool) -> None:
        if express:
            self._express_running = False
        else:
            self._running = False
        error = done.exception()
        for index, (_, future) in enumerate(batch):
            if future.done():  # the caller was cancelled
                continue
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(done.result()[index])
        if self._queued and not self._running:
            self._start()
