"""Taking turns: the order in which queued work of many tenants goes next.

Wherever work waits in one queue for a batch (the web's publisher, a worker's database
batches), first come, first served puts one tenant's single event behind another's
flood. ``in_turns`` picks a batch by turns instead: one item of every tenant that has
some, then a second of each, and so on, tenants in the order they first queued, each
tenant's items in their own order. ``TurnQueue`` does the same for a queue that threads
share, over everything waiting in it.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Callable, Generic, Hashable, Iterable, Sequence, TypeVar

T = TypeVar("T")


def in_turns(queued: Sequence[T], key: Callable[[T], Hashable], size: int) -> tuple[list[T], list[T]]:
    """Up to ``size`` of ``queued`` taken by turns of ``key``, and the rest in the order they queued."""
    by_key: dict[Hashable, list[T]] = {}
    for item in queued:
        by_key.setdefault(key(item), []).append(item)
    if len(by_key) <= 1:
        return list(queued[:size]), list(queued[size:])
    batch: list[T] = []
    turn = 0
    while len(batch) < size:
        took = False
        for items in by_key.values():
            if turn < len(items):
                batch.append(items[turn])
                took = True
                if len(batch) == size:
                    break
        if not took:
            break
        turn += 1
    chosen = {id(item) for item in batch}
    return batch, [item for item in queued if id(item) not in chosen]


class TurnQueue(Generic[T]):
    """A thread-safe queue that hands out by turns: one FIFO per key, ``take`` goes round them.

    Unlike ``in_turns`` over the first ``size`` items queued, it takes turns over everything
    waiting: one tenant's single event goes out in the next batch even when another tenant
    has thousands queued before it. Keys take turns in the order they first queued (a key
    whose items ran out queues afresh at the end).
    """

    def __init__(self, key: Callable[[T], Hashable]) -> None:
        self._key = key
        self._queues: dict[Hashable, deque[T]] = {}
        self._count = 0
        self._changed = threading.Condition(threading.Lock())

    def __len__(self) -> int:
        return self._count

    def put(self, items: Iterable[T]) -> None:
        with self._changed:
            for item in items:
                self._queues.setdefault(self._key(item), deque()).append(item)
                self._count += 1
            self._changed.notify_all()

    def wait(self, timeout: float | None, at_least: int = 1) -> bool:
        """Block until ``at_least`` items wait (True) or ``timeout`` seconds have passed (False)."""
        with self._changed:
            return self._changed.wait_for(lambda: self._count >= at_least, timeout)

    def take(self, size: int) -> list[T]:
        """Up to ``size`` items, by turns of their keys, each key's items in the order they queued."""
        taken: list[T] = []
        with self._changed:
            while len(taken) < size and self._queues:
                for key in list(self._queues):
                    items = self._queues[key]
                    taken.append(items.popleft())
                    if not items:
                        del self._queues[key]
                    if len(taken) == size:
                        break
            self._count -= len(taken)
        return taken

    def clear(self) -> None:
        with self._changed:
            self._queues.clear()
            self._count = 0
