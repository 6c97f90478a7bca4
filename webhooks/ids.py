"""Public identifiers: a type prefix and a time-ordered random part (``evt_01JD…``).

The first ten characters encode the creation time in milliseconds, so sorting ids
sorts by creation time and an id can serve as a page cursor.
"""

from __future__ import annotations

import os
import time

#: Crockford base32: no I, L, O or U, so ids read aloud and copy without mistakes.
ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"

#: Every prefix in use; an id with another prefix is rejected before any lookup.
PREFIXES = ("ten", "key", "ep", "evt", "dlv", "att")

#: Every two-character string of the alphabet, indexed by the 10 bits it encodes.
_PAIRS = [first + second for first in ALPHABET for second in ALPHABET]


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
    """``count`` new ids of one millisecond, their random parts from a single read of the OS's randomness."""
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}")
    millis = int(time.time() * 1000) if now_ms is None else now_ms
    head = f"{prefix}_{_encode(millis, 10)}"
    random = os.urandom(10 * count)
    return [head + _encode(int.from_bytes(random[i:i + 10], "big"), 16) for i in range(0, 10 * count, 10)]


def has_prefix(value: str, prefix: str) -> bool:
    """True if ``value`` looks like an id of this type (cheap check before a lookup)."""
    body = value[len(prefix) + 1 :]
    return value.startswith(prefix + "_") and len(body) == 26 and all(c in ALPHABET for c in body)
