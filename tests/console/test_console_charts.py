"""Console helpers that are pure functions: SVG charts, hourly buckets, times, tiers and causes."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest

from webhooks.console import charts
from webhooks.console.formatting import actor_label, cause_detail, cause_label, parse_when, tier_label
from webhooks.console.stats import HourStat, hourly
from webhooks.messaging.ladder import Ladder
from webhooks.pages.text import duration_text, relative, utc_text

NOW = datetime(2026, 11, 22, 10, 30)


def hours(**at: HourStat) -> list[HourStat]:
    """24 empty hours ending with the current one; ``h<n>=HourStat`` fills hour n (0 = oldest)."""
    start = NOW.replace(minute=0) - timedelta(hours=23)
    stats = [HourStat(start + timedelta(hours=n)) for n in range(24)]
    for key, stat in at.items():
        stats[int(key[1:])] = stat
    return stats


def test_samples_are_bucketed_into_the_last_24_whole_hours_with_percentiles() -> None:
    samples = [(NOW - timedelta(minutes=10), float(ms), ms != 500) for ms in (10, 20, 30, 40, 500)]
    samples += [(NOW - timedelta(hours=3), 100.0, True), (NOW - timedelta(hours=30), 1.0, False)]

    stats = hourly(samples, NOW)

    assert len(stats) == 24 and stats[0].start == datetime(2026, 11, 21, 11) and stats[-1].start == datetime(2026, 11, 22, 10)
    last = stats[-1]
    assert (last.total, last.succeeded, last.p50_ms, last.p95_ms) == (5, 4, 30.0, 500.0)
    assert last.success_rate == 0.8
    assert stats[-4].total == 1 and sum(stat.total for stat in stats) == 6  # 30 h ago is outside
    assert stats[0].success_rate is None and stats[0].p50_ms is None


def test_success_chart_draws_one_stacked_bar_per_hour_with_traffic() -> None:
    svg = charts.success_chart(hours(h22=HourStat(NOW, total=4, succeeded=3), h23=HourStat(NOW, total=2, succeeded=2)))

    assert svg.startswith("<svg") and svg.count('<g class="bar">') == 2
    assert "3 of 4 attempts succeeded (75%)" in svg and "2 of 2 attempts succeeded (100%)" in svg
    heights = [float(h) for h in re.findall(r'<rect x="[\d.]+" y="[\d.]+" width="[\d.]+" height="([\d.]+)"', svg)]
    failed, good = heights[0:2]  # the first bar: failed part above, succeeded part below
    assert good == pytest.approx(3 * failed)
    assert "No attempts" not in svg


def test_charts_without_traffic_say_so() -> None:
    for svg in (charts.success_chart(hours()), charts.latency_chart(hours())):
        assert "No attempts in the last 24 hours" in svg and "<polyline" not in svg and 'class="bar"' not in svg


def test_latency_chart_draws_median_and_p95_lines_broken_where_nothing_was_sent() -> None:
    busy = {"total": 3, "succeeded": 3, "p50_ms": 120.0, "p95_ms": 900.0}
    stats = hours(h0=HourStat(NOW, **busy), h1=HourStat(NOW, **busy), h3=HourStat(NOW, **busy), h4=HourStat(NOW, **busy))

    svg = charts.latency_chart(stats)

    assert svg.count("<polyline") == 4  # two segments (hours 0-1 and 3-4) for each of the two lines
    assert svg.count("<circle") == 8
    assert ">1 s</text>" in svg and ">500 ms</text>" in svg  # the axis tops out at a nice 1 s


def test_chart_text_is_escaped() -> None:
    svg = charts._svg('<script>"x"</script>', [])

    assert "<script>" not in svg and "&lt;script&gt;" in svg


@pytest.mark.parametrize(("value", "ceiling"), [(0, 1), (0.3, 0.5), (7, 10), (120, 200), (901, 1000), (2000, 2000)])
def test_axes_end_at_a_nice_number(value: float, ceiling: float) -> None:
    assert charts.nice_ceiling(value) == ceiling


@pytest.mark.parametrize(
    ("delta", "text"),
    [(0, "just now"), (-42, "42 s ago"), (-180, "3 min ago"), (-7200, "2 h ago"), (-86400, "1 day ago"),
     (-3 * 86400, "3 days ago"), (300, "in 5 min")],
)
def test_relative_times(delta: int, text: str) -> None:
    assert relative(NOW + timedelta(seconds=delta), NOW) == text


def test_times_durations_tiers_and_causes_read_as_people_say_them() -> None:
    ladder = Ladder.parse("5s,5m,30m")
    assert utc_text(NOW) == "2026-11-22 10:30:00 UTC"
    assert (duration_text(12.4), duration_text(1500), duration_text(None)) == ("12 ms", "1.50 s", "")
    assert [tier_label(n, "ladder", ladder) for n in (1, 2, 4, 5)] == [
        "first try", "tier 1 (after 5s)", "tier 3 (after 30m)", "tier 4"]
    assert tier_label(5, "resend", ladder) == "manual resend" and tier_label(2, "recover", ladder) == "recover / replay"
    assert (cause_label("http_status", 503), cause_label(None, 500), cause_label("blocked_address", None)) == (
        "HTTP 503 Service Unavailable: an error at the receiver", "HTTP 500 Internal Server Error: an error at the receiver",
        "the address is not allowed (loopback, private or reserved)")
    assert cause_label("http_status", 429) == "HTTP 429 Too Many Requests: the receiver asked us to slow down"
    assert cause_label("redirect", 302) == "HTTP 302 Found: a redirect, which is not followed"
    assert cause_label("timeout", None) == "timed out: no answer within the time limit"
    assert cause_label("something_new", None) == "failed (something new)"


def test_a_cause_shows_the_error_text_only_where_it_says_more_than_the_label() -> None:
    assert cause_detail("HTTP 500", 500) is None and cause_detail(" HTTP 500 ", 500) is None
    assert cause_detail("HTTP 410 Gone: endpoint disabled", 410) == "HTTP 410 Gone: endpoint disabled"
    assert cause_detail("ConnectError: refused", None) == "ConnectError: refused" and cause_detail(None, None) is None


def test_who_did_it_reads_as_a_person_would_say_it() -> None:
    assert actor_label("cli:root") == "root on the command line"
    assert actor_label("ana@example.com") == "ana@example.com" and actor_label("cli:") == "cli:"


def test_times_in_filters_are_durations_ago_or_iso_dates_in_utc() -> None:
    assert parse_when("24h", NOW) == NOW - timedelta(hours=24)
    assert parse_when("2026-11-20T08:00", NOW) == datetime(2026, 11, 20, 8)
    assert parse_when("2026-11-20T10:00:00+02:00", NOW) == datetime(2026, 11, 20, 8)
    assert parse_when("2026-11-20T08:00:00.000Z", NOW) == datetime(2026, 11, 20, 8)
    with pytest.raises(ValueError, match="not a time"):
        parse_when("last tuesday", NOW)
