"""Parse and name durations such as ``500ms``, ``5s``, ``30m``, ``2h`` and ``1d``.

Names are canonical (``60s`` is ``1m``) so that one delay always maps to one queue name.
"""

from __future__ import annotations

import re

#: Units from largest to smallest, in milliseconds; canonical names use the largest exact unit.
UNITS_MS: tuple[tuple[str, int], ...] = (
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
)

_PATTERN = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d)?\s*$")


def parse_ms(text: str) -> int:
    """Return the duration ``text`` in milliseconds; a bare number means seconds."""
    match = _PATTERN.match(text)
    if match is None:
        raise ValueError(f"invalid duration {text!r}: use a whole number with ms, s, m, h or d")
    value, unit = int(match.group(1)), match.group(2) or "s"
    return value * dict(UNITS_MS)[unit]


def parse_seconds(text: str) -> float:
    """Return the duration ``text`` in seconds."""
    return parse_ms(text) / 1000


def name_ms(ms: int) -> str:
    """Return the canonical name of ``ms`` milliseconds (``90000`` is ``90s``, ``60000`` is ``1m``)."""
    if ms <= 0:
        raise ValueError("a duration must be positive")
    for unit, size in UNITS_MS:
        if ms % size == 0:
            return f"{ms // size}{unit}"
    raise AssertionError("unreachable: 1 ms divides every integer")
