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


def _at_most(limit: int) -> str:
    """A regex matching the decimal numbers 0..``limit`` written without leading zeros."""
    digits = str(limit)
    options = ["0"] if limit > 0 else []
    if len(digits) > 1:
        options.append(r"[1-9]\d{0,%d}" % (len(digits) - 2) if len(digits) > 2 else "[1-9]")
    for i, digit in enumerate(digits):
        low = 1 if i == 0 else 0
        if int(digit) > low:
            options.append(f"{digits[:i]}[{low}-{int(digit) - 1}]" + (r"\d{%d}" % (len(digits) - i - 1) if i < len(digits) - 1 else ""))
    options.append(digits)
    return "(?:" + "|".join(dict.fromkeys(options)) + ")"


def pattern_up_to(limit: str) -> str:
    """A regex (Python and ECMA alike) of the durations ``parse_ms`` reads that are at most ``limit``,
    written plainly (no spaces, no leading zeros): what the API documents and enforces for such a field."""
    limit_ms = parse_ms(limit)
    options = [_at_most(limit_ms // size) + (unit if unit != "s" else "s?") for unit, size in UNITS_MS]
    return "^(?:" + "|".join(options) + ")$(?!\\n)"


def name_ms(ms: int) -> str:
    """Return the canonical name of ``ms`` milliseconds (``90000`` is ``90s``, ``60000`` is ``1m``)."""
    if ms <= 0:
        raise ValueError("a duration must be positive")
    for unit, size in UNITS_MS:
        if ms % size == 0:
            return f"{ms // size}{unit}"
    raise AssertionError("unreachable: 1 ms divides every integer")
