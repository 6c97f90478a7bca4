"""UTC time helpers: the database stores naive UTC, the API speaks ISO 8601 with ``Z``."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone


def utcnow() -> datetime:
    """Now, as a naive UTC datetime (what every timestamp column holds)."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def isoformat(value: datetime | None) -> str | None:
    """``2026-11-22T10:00:00.123Z`` for a naive UTC datetime; None stays None."""
    if value is None:
        return None
    return value.replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"


def to_naive_utc(value: datetime) -> datetime:
    """Convert an aware datetime to naive UTC; a naive one is taken as UTC already."""
    if value.tzinfo is None:
        return value
    return value.astimezone(timezone.utc).replace(tzinfo=None)


def seconds(value: float) -> timedelta:
    """A timedelta of ``value`` seconds (reads better inline than the keyword form)."""
    return timedelta(seconds=value)
