"""Pure text helpers of the console: tiers, who asked, failure causes, times typed in forms.

(Times, durations and JSON for people are the page kit's: ``webhooks.pages.text``.)
"""

from __future__ import annotations

from datetime import datetime, timedelta

from webhooks.durations import name_ms, parse_seconds
from webhooks.messaging.ladder import Ladder
from webhooks.storage.statuses import LADDER_STATUSES
from webhooks.storage.timeutil import to_naive_utc


def tier_label(attempt_no: int, trigger: str, ladder: Ladder) -> str:
    """Which tier an attempt belongs to: ``first try``, ``tier 2 (after 5m)``, or a person's ``resend``."""
    if trigger != "ladder":
        return {"resend": "manual resend", "recover": "recover / replay"}.get(trigger, trigger)
    if attempt_no <= 1:
        return "first try"
    tier = attempt_no - 1
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
