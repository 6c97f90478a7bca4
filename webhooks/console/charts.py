"""Inline SVG charts rendered on the server: hourly success rate and latency of an endpoint.

Pure functions of ``HourStat`` lists; every text is escaped, so the output is safe Markup.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from markupsafe import Markup, escape

from webhooks.console.stats import HourStat

WIDTH, HEIGHT = 480, 170
LEFT, RIGHT, TOP, BOTTOM = 52, 8, 22, 20
PLOT_W, PLOT_H = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

#: Fill colours (also readable without colour: the tooltips and the table say the numbers).
GOOD, BAD, GRID, INK, MUTED = "#2f855a", "#c53030", "#e2e8f0", "#1a202c", "#718096"
P50_COLOUR, P95_COLOUR = "#2b6cb0", "#d69e2e"

#: Hour labels are written under every n-th hour.
LABEL_EVERY = 6


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten that is at least ``value`` (axis maximum)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * power >= value:
            return float(step * power)
    raise AssertionError("unreachable: 10 * power >= value")


def ms_label(value: float) -> str:
    """An axis label: ``250 ms``, ``1.5 s``."""
    return f"{value:g} ms" if value < 1000 else f"{value / 1000:g} s"


def _legend(items: Sequence[tuple[str, str]]) -> str:
    """Colour keys in a row above the plot."""
    parts, x = [], LEFT
    for colour, text in items:
        parts.append(f'<rect x="{x}" y="6" width="10" height="10" fill="{colour}"/>'
                     f'<text x="{x + 14}" y="15" fill="{INK}">{escape(text)}</text>')
        x += 22 + 6 * len(text)
    return "".join(parts)


def _svg(label: str, body: list[str]) -> Markup:
    return Markup(
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" role="img" aria-label="{escape(label)}" '
        f'xmlns="http://www.w3.org/2000/svg" font-family="system-ui, sans-serif" font-size="11">'
        f"<title>{escape(label)}</title>{''.join(body)}</svg>"
    )


def _gridline(y: float, text: str) -> str:
    return (
        f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="{GRID}"/>'
        f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" fill="{MUTED}">{escape(text)}</text>'
    )


def _hour_labels(stats: Sequence[HourStat]) -> list[str]:
    slot = PLOT_W / max(len(stats), 1)
    return [
        f'<text x="{LEFT + (index + 0.5) * slot:.1f}" y="{HEIGHT - 6}" text-anchor="middle" fill="{MUTED}">'
        f"{hour.start:%H:%M}</text>"
        for index, hour in enumerate(stats)
        if index % LABEL_EVERY == 0
    ]


def _empty(stats: Sequence[HourStat]) -> str:
    return "" if any(hour.total for hour in stats) else (
        f'<text x="{LEFT + PLOT_W / 2}" y="{TOP + PLOT_H / 2}" text-anchor="middle" fill="{MUTED}">'
        "No attempts in the last 24 hours</text>"
    )


def success_chart(stats: Sequence[HourStat]) -> Markup:
    """One stacked bar an hour: succeeded attempts in green below, failed in red above."""
    slot = PLOT_W / max(len(stats), 1)
    body = [_gridline(TOP + PLOT_H * (1 - level), f"{level:.0%}") for level in (0, 0.5, 1)]
    for index, hour in enumerate(stats):
        if not hour.total:
            continue
        x, width = LEFT + index * slot + slot * 0.15, slot * 0.7
        good = PLOT_H * hour.succeeded / hour.total
        tip = escape(f"{hour.start:%H:%M} UTC: {hour.succeeded} of {hour.total} attempts succeeded "
                     f"({hour.success_rate:.0%})")
        body.append(
            f'<g class="bar"><title>{tip}</title>'
            f'<rect x="{x:.1f}" y="{TOP:.1f}" width="{width:.1f}" height="{PLOT_H - good:.1f}" fill="{BAD}"/>'
            f'<rect x="{x:.1f}" y="{TOP + PLOT_H - good:.1f}" width="{width:.1f}" height="{good:.1f}" fill="{GOOD}"/>'
            "</g>"
        )
    body += _hour_labels(stats) + [_legend(((GOOD, "succeeded"), (BAD, "failed"))), _empty(stats)]
    return _svg("Success rate per hour, last 24 hours (UTC)", body)


def latency_chart(stats: Sequence[HourStat]) -> Markup:
    """Median and 95th percentile attempt duration per hour, as two lines (gaps where nothing was sent)."""
    slot = PLOT_W / max(len(stats), 1)
    top = nice_ceiling(max((hour.p95_ms or 0 for hour in stats), default=0))
    body = [_gridline(TOP + PLOT_H * (1 - level), ms_label(top * level)) for level in (0, 0.5, 1)]
    for attribute, colour, dash in (("p95_ms", P95_COLOUR, ' stroke-dasharray="4 3"'), ("p50_ms", P50_COLOUR, "")):
        points: list[tuple[float, float, HourStat]] = []
        for index, hour in enumerate(stats):
            value = getattr(hour, attribute)
            if value is None:
                body.append(_line(points, colour, dash))
                points = []
                continue
            points.append((LEFT + (index + 0.5) * slot, TOP + PLOT_H * (1 - value / top), hour))
            tip = escape(f"{hour.start:%H:%M} UTC: {attribute[:3]} {value:.0f} ms over {hour.total} attempts")
            body.append(f'<circle cx="{points[-1][0]:.1f}" cy="{points[-1][1]:.1f}" r="3" fill="{colour}">'
                        f"<title>{tip}</title></circle>")
        body.append(_line(points, colour, dash))
    body += _hour_labels(stats) + [_legend(((P50_COLOUR, "median"), (P95_COLOUR, "95th percentile"))), _empty(stats)]
    return _svg("Attempt latency per hour, last 24 hours (UTC)", body)


def _line(points: list[tuple[float, float, HourStat]], colour: str, dash: str) -> str:
    if len(points) < 2:
        return ""
    coordinates = " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in points)
    return f'<polyline points="{coordinates}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>'
