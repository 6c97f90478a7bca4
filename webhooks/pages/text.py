"""Text helpers every page uses: times in UTC and relative to now, durations, JSON for people,
and links to the same page with other query parameters."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from flask import g, request, url_for
from markupsafe import Markup

from webhooks.storage.timeutil import isoformat, utcnow

#: (seconds in the unit, singular, plural) from largest to smallest, for "3 min ago".
_UNITS = ((86_400, "day", "days"), (3_600, "h", "h"), (60, "min", "min"), (1, "s", "s"))


def utc_text(value: datetime | None) -> str:
    """``2026-11-22 10:00:03 UTC`` (the pages show every time in UTC)."""
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
    """``12 ms``, ``1.25 s``: how long something took."""
    if ms is None:
        return ""
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.2f} s"


def pretty_json(value: Any) -> str:
    """Indented JSON for people (escaped by the template like any other text)."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def when(value: datetime | None) -> Markup:
    """``<time>`` showing a relative time, the exact UTC time in its tooltip (a dash for None)."""
    if value is None:
        return Markup('<span class="muted">—</span>')
    return Markup('<time datetime="{}" title="{}">{}</time>').format(
        isoformat(value), utc_text(value), relative(value, g.get("now") or utcnow())
    )


def url_with(**changes: Any) -> str:
    """This page's URL with some query parameters changed (None or "" removes one): pagers, filters."""
    args = {**request.args.to_dict(), **changes}
    return url_for(str(request.endpoint), **(request.view_args or {}), **{k: v for k, v in args.items() if v})
