"""Public identifiers: a type prefix and a time-ordered random part (``evt_01JD…``).

The first ten characters encode the creation time in milliseconds, so sorting ids
sorts by creation time and an id can serve as a page cursor.
"""

from __future__ import annotations

import secrets
import time

#: Crockford base32: no I, L, O or U, so ids read aloud and copy without mistakes.
ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"

#: Every prefix in use; an id with another prefix is rejected before any lookup.
PREFIXES = ("ten", "key", "ep", "evt", "dlv", "att")


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, digit = divmod(value, 32)
        chars.append(ALPHABET[digit])
    return "".join(reversed(chars))


def new_id(prefix: str, now_ms: int | None = None) -> str:
    """A new id such as ``dlv_01jd3k…`` (26 characters after the prefix, 80 random bits)."""
    if prefix not in PREFIXES:
        raise ValueError(f"unknown id prefix {prefix!r}")
    millis = int(time.time() * 1000) if now_ms is None else now_ms
    return f"{prefix}_{_encode(millis, 10)}{_encode(secrets.randbits(80), 16)}"


def has_prefix(value: str, prefix: str) -> bool:
    """True if ``value`` looks like an id of this type (cheap check before a lookup)."""
    body = value[len(prefix) + 1 :]
    return value.startswith(prefix + "_") and len(body) == 26 and all(c in ALPHABET for c in body)
