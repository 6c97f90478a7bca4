"""Pure text helpers of the console: UTC and relative times, durations, tiers, causes, JSON."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from webhooks.durations import name_ms, parse_seconds
from webhooks.messaging.ladder import Ladder
from webhooks.storage.statuses import LADDER_STATUSES
from webhooks.storage.timeutil import to_naive_utc

#: (seconds in the unit, singular, plural) from largest to smallest, for "3 min ago".
_UNITS = ((86_400, "day", "days"), (3_600, "h", "h"), (60, "min", "min"), (1, "s", "s"))


def utc_text(value: datetime | None) -> str:
    """``2026-11-22 10:00:03 UTC`` (the console shows every time in UTC)."""
    return "" if value is None else f"{value:%Y-%m-%d %H:%M:%S} UTC"


def relative(value: datetime, now: datetime) -> str:
    """``3 min ago``, ``in 2 h``, ``just now``: the largest whole unit of the distance to ``now``."""
    delta = (value - now).total_seconds()
    distance = abs(delta)
    if distance < 5:
        return "just now"
    for size, singular, plural in _UNITS:
        if distance >= size:
            count = int(distance // size)
            text = f"{count} {singular if count == 1 else plural}"
            return f"in {text}" if delta > 0 else f"{text} ago"
    raise AssertionError("unreachable: distance >= 5 s")


def duration_text(ms: float | None) -> str:
    """``12 ms``, ``1.25 s``: how long an attempt took."""
    if ms is None:
        return ""
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def tier_label(ladder_no: int, trigger: str, ladder: Ladder) -> str:
    """Which tier an attempt belongs to: ``first try``, ``tier 2 (after 5m)``, or a person's ``resend``.

    ``ladder_no``: the attempt's place among its delivery's ladder attempts (resends, recovers
    and probes, outside the ladder, do not move a delivery along it)."""
    if trigger != "ladder":
        return {"resend": "manual resend", "recover": "recover / replay",
                "probe": "probe (endpoint offline)"}.get(trigger, trigger)
    if ladder_no <= 1:
        return "first try"
    tier = ladder_no - 1
    if tier > len(ladder.delays_ms):
        return f"tier {tier}"
    return f"tier {tier} (after {name_ms(ladder.delays_ms[tier - 1])})"


def next_attempt_holds(attempt_no: int, due: datetime | None, delivery_attempts: int, delivery_status: str) -> bool:
    """Whether an attempt's "next attempt due" still stands: it is the delivery's latest attempt
    and the delivery is still waiting for the next one (a delivered one waits for nothing)."""
    return due is not None and attempt_no == delivery_attempts and delivery_status in LADDER_STATUSES


def requester_label(kind: str, name: str, key_name: str | None = None) -> str:
    """Who asked for a resend or recover, for people: an API key (with its name), a staff member, the CLI."""
    if kind == "api_key":
        return f"tenant API key “{key_name}” ({name})" if key_name else f"tenant API key {name}"
    if kind == "cli":
        return f"command line ({name})"
    return f"{name} (staff)"


def cause_label(error_class: str | None, response_status: int | None) -> str:
    """What went wrong in one phrase: ``HTTP 500``, ``timeout``, ``connection``."""
    if error_class in (None, "http_status") and response_status is not None:
        return f"HTTP {response_status}"
    return (error_class or "unknown").replace("_", " ")


def pretty_json(value: Any) -> str:
    """Indented JSON for people (escaped by the template like any other text)."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def parse_when(text: str, now: datetime) -> datetime:
    """A point in time from ``24h`` / ``30m`` (that long ago) or an ISO 8601 date and time (UTC if no offset)."""
    text = text.strip()
    try:
        return now - timedelta(seconds=parse_seconds(text))
    except ValueError:
        pass
    try:
        return to_naive_utc(datetime.fromisoformat(text))
    except ValueError:
        raise ValueError(f"{text!r} is not a time: use e.g. 24h, 30m or 2026-11-22 10:00") from None
