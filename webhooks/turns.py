"""Taking turns by tenant: the one round-robin of the service, and a tenant's share while others are active.

Wherever work of many tenants (or clients) waits for one resource, first come, first
served puts one tenant's single item behind another's flood. ``Rotation`` serves keys in
turn instead: each key's items first in, first out; the next item comes from the key
whose turn it is, and that key goes to the back of the ring if it has more. Every place
that takes turns is built on it:

- the worker's lanes (``webhooks.delivery.lanes``): tenants in turn, then each tenant's
  endpoints in turn;
- the database batches (``webhooks.delivery.batcher``, through ``in_turns``) and the web's
  background publisher (``webhooks.messaging.enqueuer``, through ``TurnQueue``);
- the web server's requests waiting for a thread (``webhooks.server.turns``), by
  credential, where the client with the fewest running goes first among those in turn.

The lanes and the web server also shrink a busy tenant's share of the process while
another tenant has been active in it recently (``RecentTenants``), so that the other's one
request or delivery does not queue behind the busy tenant's many; ``count_down`` keeps
their per-tenant counts without tenants at zero.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Callable, Generic, Hashable, Iterable, Iterator, Sequence, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")

#: Seconds a tenant counts as active after it was last seen.
SHARE_WINDOW_SECONDS = 1.0


class Rotation(Generic[K, T]):
    """Items waiting by key, served in turns of their keys (each key's items in the order they came).

    A key is in the ring while it has items, in the order it (re)entered; ``take`` serves the
    first key (or a chosen one) and sends it to the back if it has more, out of the ring if not.
    ``hold`` takes a key out of the ring with its items kept (a key at its share); ``put`` and
    ``resume`` bring it back, at the end. Not thread-safe (``TurnQueue`` is).
    """

    __slots__ = ("_items", "_ring", "_in_ring", "_count")

    def __init__(self) -> None:
        self._items: dict[K, deque[T]] = {}
        self._ring: deque[K] = deque()
        self._in_ring: set[K] = set()
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        """Is any key in the ring?"""
        return bool(self._ring)

    def put(self, key: K, item: T) -> None:
        """Queue ``item`` for ``key``'s turn (a key not in the ring enters it at the end)."""
        items = self._items.get(key)
        if items is None:
            items = self._items[key] = deque()
        items.append(item)
        self._count += 1
        self.resume(key)

    def in_turn(self) -> Iterator[K]:
        """The keys in the ring, in turn order (a snapshot: the caller may take meanwhile)."""
        return iter(list(self._ring))

    def take(self, key: K | None = None) -> tuple[K, T] | None:
        """The next item of ``key`` (default: the key whose turn it is), with its key; None if the ring is empty."""
        if key is None:
            if not self._ring:
                return None
            key = self._ring.popleft()
        else:
            self._ring.remove(key)
        items = self._items[key]
        item = items.popleft()
        self._count -= 1
        if items:
            self._ring.append(key)
        else:
            del self._items[key]
            self._in_ring.discard(key)
        return key, item

    def take_many(self, size: int) -> list[T]:
        """Up to ``size`` items by turns: one of every key, then a second of each, and so on."""
        taken: list[T] = []
        while len(taken) < size and self._ring:
            _, item = self.take()  # type: ignore[misc]
            taken.append(item)
        return taken

    def hold(self, key: K) -> None:
        """Take ``key`` out of the ring, its items kept, until ``put`` or ``resume``."""
        if key in self._in_ring:
            self._in_ring.discard(key)
            self._ring.remove(key)

    def resume(self, key: K) -> None:
        """Put ``key`` back in the ring, at the end, if it has items and is not there."""
        if key not in self._in_ring and key in self._items:
            self._in_ring.add(key)
            self._ring.append(key)

    def waiting(self, key: K) -> int:
        """How many of ``key``'s items wait."""
        items = self._items.get(key)
        return 0 if items is None else len(items)

    def clear(self) -> None:
        self._items.clear()
        self._ring.clear()
        self._in_ring.clear()
        self._count = 0


def in_turns(queued: Sequence[T], key: Callable[[T], Hashable], size: int) -> tuple[list[T], list[T]]:
    """Up to ``size`` of ``queued`` taken by turns of ``key``, and the rest in the order they queued."""
    rotation: Rotation[Hashable, tuple[int, T]] = Rotation()
    for index, item in enumerate(queued):
        rotation.put(key(item), (index, item))
    chosen = rotation.take_many(size)
    taken = {index for index, _ in chosen}
    return [item for _, item in chosen], [item for index, item in enumerate(queued) if index not in taken]


class TurnQueue(Generic[T]):
    """A thread-safe ``Rotation`` keyed by ``key(item)``: ``take`` goes round everything waiting.

    Unlike ``in_turns`` over the first ``size`` items queued, it takes turns over everything
    waiting: one tenant's single event goes out in the next batch even when another tenant
    has thousands queued before it.
    """

    def __init__(self, key: Callable[[T], Hashable]) -> None:
        self._key = key
        self._rotation: Rotation[Hashable, T] = Rotation()
        self._changed = threading.Condition(threading.Lock())

    def __len__(self) -> int:
        return len(self._rotation)

    def put(self, items: Iterable[T]) -> None:
        with self._changed:
            for item in items:
                self._rotation.put(self._key(item), item)
            self._changed.notify_all()

    def wait(self, timeout: float | None, at_least: int = 1) -> bool:
        """Block until ``at_least`` items wait (True) or ``timeout`` seconds have passed (False)."""
        with self._changed:
            return self._changed.wait_for(lambda: len(self._rotation) >= at_least, timeout)

    def take(self, size: int) -> list[T]:
        """Up to ``size`` items, by turns of their keys, each key's items in the order they queued."""
        with self._changed:
            return self._rotation.take_many(size)

    def clear(self) -> None:
        with self._changed:
            self._rotation.clear()


class RecentTenants:
    """The two tenants seen last, and when: enough to tell whether any tenant but a given one
    was seen within the window (the latest other than it is one of the two)."""

    __slots__ = ("_latest", "window")

    def __init__(self, window: float = SHARE_WINDOW_SECONDS) -> None:
        self.window = window
        self._latest: list[tuple[str, float]] = []

    def seen(self, tenant_id: str, now: float) -> None:
        latest = self._latest
        if latest and latest[0][0] == tenant_id:
            latest[0] = (tenant_id, now)
        else:
            self._latest = [(tenant_id, now), *latest[:1]]

    def others_active(self, tenant_id: str, now: float) -> bool:
        """Was a tenant other than ``tenant_id`` seen within the window before ``now``?"""
        for other, at in self._latest:
            if other != tenant_id:
                return now - at <= self.window
        return False


def count_down(counts: dict[K, int], key: K) -> None:
    """One less for ``key``; a key at zero is dropped."""
    left = counts.get(key, 0) - 1
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)
