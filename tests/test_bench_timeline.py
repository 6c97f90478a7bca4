"""The benchmark's figures from a receiver's record (bench/kit/timeline.py) and its statistics (bench/kit/stats.py)."""

from __future__ import annotations

import math

import pytest

from bench.kit.receiver import ABANDONED, ANSWERED, Counter
from bench.kit.stats import percentile, plateau_memory, steady_rate, summary
from bench.kit.timeline import Call, in_flight_at, latency_buckets, mean_in_flight, parse_timeline, window_summary


def call(arrival: float, end: float | None, outcome: str = "a", in_flight: int = 1) -> Call:
    return Call(arrival, end, outcome, in_flight, "msg", "/p")


def test_timeline_lines_of_the_receiver_parse_back_into_calls() -> None:
    counter = Counter()
    first = counter.record(b"/slow/200/a", b"msg_1")
    counter.record(b"/slow/200/a", b"msg_2")
    counter.record(b"/other", b"")
    counter.finish(counter.epoch, first, ANSWERED)
    calls = parse_timeline(counter.timeline(b"/slow/", exact=False).decode())
    assert [(c.webhook_id, c.outcome, c.in_flight) for c in calls] == [("msg_1", "a", 1), ("msg_2", "p", 2)]
    assert calls[0].latency is not None and calls[0].latency >= 0
    assert calls[1].end is None and calls[1].latency is None
    assert parse_timeline(counter.timeline(b"/other", exact=True).decode())[0].webhook_id == "-"


def test_a_call_finished_twice_or_recorded_before_a_reset_changes_nothing() -> None:
    counter = Counter()
    index = counter.record(b"/p", b"m")
    old_epoch = counter.epoch
    counter.finish(old_epoch, index, ANSWERED)
    counter.finish(old_epoch, index, ABANDONED)
    assert counter.outcomes == [ANSWERED] and counter.in_flight_total == 0
    counter.reset()
    counter.record(b"/p", b"m")
    counter.finish(old_epoch, index, ANSWERED)
    assert counter.outcomes == [b"p"] and counter.in_flight_total == 1


def test_in_flight_counts_calls_arrived_and_not_yet_ended_pending_ones_included() -> None:
    calls = [call(0.0, 2.0), call(1.0, 3.0), call(1.5, None, "p")]
    assert in_flight_at(calls, [-1.0, 0.5, 1.75, 2.5, 10.0]) == [0, 1, 3, 2, 1]


def test_mean_in_flight_is_the_time_weighted_concurrency_over_the_window() -> None:
    calls = [call(0.0, 4.0), call(2.0, 4.0)]
    assert mean_in_flight(calls, 0.0, 4.0) == pytest.approx(1.5)
    assert mean_in_flight(calls, 2.0, 4.0) == pytest.approx(2.0)
    assert math.isnan(mean_in_flight(calls, 4.0, 4.0))


def test_latency_buckets_group_answered_calls_by_arrival_second() -> None:
    calls = [call(0.1, 0.3), call(0.5, 0.6), call(1.2, 3.2), call(1.3, 1.4, "x")]
    buckets = latency_buckets(calls, 0.0, 1.0)
    assert [(b.start, b.count) for b in buckets] == [(0.0, 2), (1.0, 1)]
    assert buckets[0].p99_ms == pytest.approx(200.0)
    assert buckets[1].p50_ms == pytest.approx(2000.0)


def test_window_summary_counts_abandoned_calls_and_the_most_in_flight_at_arrival() -> None:
    calls = [call(0.0, 1.0, in_flight=1), call(0.5, 2.0, "x", in_flight=2), call(5.0, 6.0, in_flight=1)]
    summary = window_summary(calls, 0.0, 2.0)
    assert summary["arrivals"] == 2 and summary["abandoned"] == 1 and summary["max_in_flight_at_arrival"] == 2
    assert summary["rate"] == pytest.approx(1.0)


def test_percentile_is_nearest_rank_and_steady_rate_drops_the_warm_up() -> None:
    assert percentile([5, 1, 3, 2, 4], 50) == 3
    assert percentile(list(range(1, 101)), 99) == 99
    assert math.isnan(percentile([], 50))
    rate, span = steady_rate([0.0, 100.0, *[100.0 + i for i in range(1, 19)]], warmup=0.10)
    assert span == pytest.approx(17.0) and rate == pytest.approx(1.0)


def test_memory_that_holds_steady_over_the_in_flight_plateau_is_flat() -> None:
    in_flight = [(t, 0 if t < 2 else 10_000) for t in range(0, 20)]
    rss = [(t + 0.5, 80.0 if t < 2 else 300.0 + (t % 3)) for t in range(0, 20)]
    figures = plateau_memory([(float(t), n) for t, n in in_flight], rss)
    assert figures["flat"] is True and figures["plateau_seconds"] == 17.0 and figures["peak_mib"] == 302.0


def test_memory_that_keeps_growing_over_the_plateau_is_not_flat() -> None:
    in_flight = [(float(t), 10_000) for t in range(0, 20)]
    rss = [(float(t), 200.0 + 5 * t) for t in range(0, 20)]
    assert plateau_memory(in_flight, rss)["flat"] is False


def test_memory_that_follows_the_in_flight_count_up_to_its_peak_and_then_holds_is_flat() -> None:
    # The plateau (90 % of the peak) begins at 9,000 in flight; the last thousand calls' buffers come after.
    in_flight = [(float(t), min(10_000, 9_000 + 250 * t)) for t in range(0, 40)]
    rss = [(float(t), 270.0 + min(30.0, 7.5 * t)) for t in range(0, 40)]
    figures = plateau_memory(in_flight, rss)
    assert figures["plateau_start_mib"] == 270.0 and figures["at_peak_mib"] == 300.0
    assert figures["after_peak_growth_mib"] == 0.0 and figures["flat"] is True


def test_memory_that_grows_after_the_in_flight_peak_is_not_flat() -> None:
    in_flight = [(float(t), 10_000 if t < 20 else 9_500) for t in range(0, 40)]
    rss = [(float(t), 300.0 + 2 * t) for t in range(0, 40)]
    figures = plateau_memory(in_flight, rss)
    assert figures["after_peak_growth_mib"] == 78.0 and figures["flat"] is False


def test_a_peak_late_in_the_plateau_still_has_half_the_plateau_judged() -> None:
    # In flight holds at 10,000 from t=10 and touches 10,500 only at t=38; RSS creeps up from t=20.
    in_flight = [(float(t), 10_500 if t == 38 else (10_000 if t >= 10 else 0)) for t in range(0, 40)]
    rss = [(float(t), 300.0 + (3.0 * (t - 20) if t > 20 else 0.0)) for t in range(0, 40)]
    figures = plateau_memory(in_flight, rss)
    assert figures["judged_from_s"] == 24.5  # the plateau runs 10-39 s: its midpoint, not the peak at 38 s
    assert figures["after_peak_growth_mib"] == 42.0 and figures["flat"] is False


def test_flatness_is_not_judged_without_anything_in_flight() -> None:
    assert plateau_memory([(0.0, 0), (1.0, 0)], [(0.0, 50.0), (1.0, 51.0)])["flat"] is None


def test_a_latency_summary_counts_the_values_and_gives_their_percentiles_and_the_largest() -> None:
    values = [float(ms) for ms in range(1, 101)]

    assert summary(values) == {"count": 100, "p50_ms": 50.0, "p99_ms": 99.0, "max_ms": 100.0}
    assert summary([1.234, 5.678], (50, 95), digits=1) == {"count": 2, "p50_ms": 1.2, "p95_ms": 5.7, "max_ms": 5.7}
    assert summary([])["count"] == 0 and math.isnan(summary([])["max_ms"])
