"""Taking turns: the order in which queued work of many tenants goes next.

Wherever work waits in one queue for a batch (the web's publisher, a worker's database
batches), first come, first served puts one tenant's single event behind another's
flood. ``in_turns`` picks a batch by turns instead: one item of every tenant that has
some, then a second of each, and so on, tenants in the order they first queued, each
tenant's items in their own order.
"""

from __future__ import annotations

from typing import Callable, Hashable, Sequence, TypeVar

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
