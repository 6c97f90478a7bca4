"""Group commit: many threads' small writes done as one batch, in one transaction.

Every delivery thread claims and records its attempts through a ``GroupCommit``. A
caller queues its item and waits; whichever caller finds no batch running becomes the
leader and runs everything queued so far (up to ``max_batch``) in one call, on its own
database connection, then hands each caller its own result. While one batch runs the
next one gathers, so under load each transaction (and each endpoint-row lock and WAL
flush) serves many attempts, and with a single caller there is no added wait at all.
No thread of its own: nothing to start or stop.

If the batch raises, every caller in it gets that exception (and retries as it would
have alone).
"""

from __future__ import annotations

import threading
from typing import Callable, Generic, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class _Slot(Generic[T, R]):
    """One caller's item, its result, and the event it waits on."""

    __slots__ = ("item", "result", "error", "done", "lead", "wake")

    def __init__(self, item: T) -> None:
        self.item = item
        self.result: R | None = None
        self.error: BaseException | None = None
        self.done = False
        #: Set by a leader leaving while this item still waits: run the next batches.
        self.lead = False
        self.wake = threading.Event()

    def outcome(self) -> R:
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]


class GroupCommit(Generic[T, R]):
    def __init__(self, run: Callable[[Sequence[T]], Sequence[R]], max_batch: int = 64) -> None:
        self._run = run
        self._max_batch = max_batch
        self._lock = threading.Lock()
        self._queued: list[_Slot[T, R]] = []
        self._leading = False

    def __call__(self, item: T) -> R:
        """``run([item, ...])[i]`` for this caller's item, batched with whoever else is waiting."""
        slot: _Slot[T, R] = _Slot(item)
        with self._lock:
            self._queued.append(slot)
            leads = not self._leading
            self._leading = True
        if not leads:
            slot.wake.wait()  # done by a leader, or handed the lead
        while not slot.done:
            with self._lock:
                batch = self._queued[: self._max_batch]
                del self._queued[: self._max_batch]
            self._execute(batch)
        if leads or slot.lead:
            with self._lock:
                if self._queued:
                    # Whoever waits longest leads next; this caller goes back to its own work.
                    following = self._queued[0]
                    following.lead = True
                    following.wake.set()
                else:
                    self._leading = False
        return slot.outcome()

    def _execute(self, batch: list[_Slot[T, R]]) -> None:
        try:
            results = self._run([slot.item for slot in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"group commit: {len(results)} results for {len(batch)} items")
        except BaseException as error:  # noqa: BLE001 - every caller in the batch gets it
            for slot in batch:
                slot.error, slot.done = error, True
                slot.wake.set()
        else:
            for slot, result in zip(batch, results):
                slot.result, slot.done = result, True
                slot.wake.set()
