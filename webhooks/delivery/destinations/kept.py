"""Connections kept per destination URL, and closed once a destination has been idle for a while.

Kinds that hold a connection to a customer's server (a Redis, a broker) keep one per URL in a
``Kept``: each delivery takes it with ``use`` (the entry is made on first use) and gives it back;
``idle`` hands over, at most every ``SWEEP_SECONDS``, the entries nobody has used for
``IDLE_SECONDS``, for the kind to close.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Generic, TypeVar

#: A destination's connections are closed after this long without a delivery (s).
IDLE_SECONDS = 60.0
#: Idle destinations are looked for at most this often (s).
SWEEP_SECONDS = 5.0

T = TypeVar("T")


@dataclass
class _Entry(Generic[T]):
    value: T
    last_used: float = field(default_factory=time.monotonic)
    busy: int = 0


class Kept(Generic[T]):
    """One ``T`` per destination URL, made when first needed."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry[T]] = {}
        self._swept = time.monotonic()

    @contextmanager
    def use(self, url: str, make: Callable[[], T], usable: Callable[[T], bool] = lambda _: True) -> Iterator[T]:
        """The URL's ``T`` (a new one if there is none or it is no longer ``usable``), busy meanwhile."""
        entry = self._entries.get(url)
        if entry is None or not usable(entry.value):
            entry = self._entries[url] = _Entry(make())
        entry.busy += 1
        try:
            yield entry.value
        finally:
            entry.busy -= 1
            entry.last_used = time.monotonic()

    def idle(self) -> list[T]:
        """The entries idle for ``IDLE_SECONDS``, forgotten (looked for every ``SWEEP_SECONDS``)."""
        now = time.monotonic()
        if now - self._swept < SWEEP_SECONDS:
            return []
        self._swept = now
        idle = [url for url, entry in self._entries.items() if not entry.busy and now - entry.last_used > IDLE_SECONDS]
        return [self._entries.pop(url).value for url in idle]

    def forget(self, url: str, value: T) -> None:
        """Forget ``value`` (e.g. its connection broke), if it is still the URL's."""
        entry = self._entries.get(url)
        if entry is not None and entry.value is value:
            del self._entries[url]

    def all(self) -> list[T]:
        """Every entry, forgotten (the kind is closing)."""
        values, self._entries = [entry.value for entry in self._entries.values()], {}
        return values
