"""Public identifiers: a type prefix and a time-ordered random part (``evt_01JD…``).

The first ten characters encode the creation time in milliseconds, so sorting ids
sorts by creation time and an id can serve as a page cursor. Within a process ids are
strictly increasing (monotonic ULIDs): an id made in the same millisecond as the one
before it (or after the clock stepped back) adds a random step to the last one's random
part instead of drawing a new one, so "newest first" is strict for everything one
process creates.
"""

from __future__ import annotations

import os
import threading
import time

#: Crockford base32: no I, L, O or U, so ids read aloud and copy without mistakes.
ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"

#: Every prefix in use; an id with another prefix is rejected before any lookup.
PREFIXES = ("ten", "key", "ep", "evt", "dlv", "att")

#: Every two-character string of the alphabet, indexed by the 10 bits it encodes.
_PAIRS = [first + second for first in ALPHABET for second in ALPHABET]


#: A new millisecond's random part stays below this, leaving room for 2**39 steps after it.
_FRESH_LIMIT = 1 << 79
#: Steps between ids of one millisecond are drawn from 1 .. 2**40: increasing, still unguessable.
_STEP_BYTES = 5


class _Monotonic:
    """The last (millisecond, random part) this process handed out, behind a lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._millis = -1
        self._random = 0

    def take(self, millis: int, count: int) -> list[tuple[int, int]]:
        """``count`` increasing (millisecond, random part) pairs for ids made at ``millis``."""
        steps = os.urandom(_STEP_BYTES * count)
        parts = []
        with self._lock:
            for i in range(0, _STEP_BYTES * count, _STEP_BYTES):
                if millis > self._millis:
                    self._millis, self._random = millis, _fresh()
                else:  # same millisecond, or the clock stepped back: go on from the last id
                    self._random += 1 + int.from_bytes(steps[i:i + _STEP_BYTES], "big")
                    if self._random >= 1 << 80:  # 2**39 ids in one millisecond: borrow the next one
                        self._millis, self._random = self._millis + 1, _fresh()
                parts.append((self._millis, self._random))
        return parts


def _fresh() -> int:
    """A new millisecond's random part."""
    return int.from_bytes(os.urandom(10), "big") % _FRESH_LIMIT


_monotonic = _Monotonic()


def _encode(value: int, length: int) -> str:
    """``value`` as ``length`` (even) characters, most significant first, two at a time."""
    chars = []
    for _ in range(length // 2):
        value, pair = divmod(value, 1024)
        chars.append(_PAIRS[pair])
    return "".join(reversed(chars))


def new_id(prefix: str, now_ms: int | None = None) -> str:
    """A new id such as ``dlv_01jd3k…`` (26 characters after the prefix, 80 random bits)."""
    return new_ids(prefix, 1, now_ms)[0]


def new_ids(prefix: str, count: int, now_ms: int | None = None) -> list[str]:
    """``count`` new ids, each greater than any this process made before.

    With ``now_ms`` (backfills, tests) the ids carry that time and random parts of their own.
    """
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}")
    if now_ms is not None:
        random = os.urandom(10 * count)
        head = f"{prefix}_{_encode(now_ms, 10)}"
        return [head + _encode(int.from_bytes(random[i:i + 10], "big"), 16) for i in range(0, 10 * count, 10)]
    return [f"{prefix}_{_encode(millis, 10)}{_encode(random, 16)}" for millis, random in _monotonic.take(int(time.time() * 1000), count)]


def id_floor(prefix: str, millis: int) -> str:
    """The smallest id of this type made at or after ``millis`` (a bound for "created since")."""
    return f"{prefix}_{_encode(millis, 10)}"


def has_prefix(value: str, prefix: str) -> bool:
    """True if ``value`` looks like an id of this type (cheap check before a lookup)."""
    body = value[len(prefix) + 1 :]
    return value.startswith(prefix + "_") and len(body) == 26 and all(c in ALPHABET for c in body)
