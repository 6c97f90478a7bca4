"""Statistics of the benchmark's figures: percentiles, steady rates, and whether memory stayed
flat while calls were in flight (standard library only, so the tests import it from the
service's virtualenv)."""

from __future__ import annotations

from typing import Any, Sequence

#: Share of the first arrivals discarded as warm-up before a rate is computed.
WARMUP = 0.10

#: RSS growth over an in-flight plateau still called flat: this share of the RSS when it began, or this many MiB.
FLAT_SHARE, FLAT_MIB = 0.10, 16.0


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (``p`` in 0..100) of ``values``; NaN when there are none."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), int(-(-p * len(ordered) // 100))))
    return ordered[rank - 1]


def summary(values: Sequence[float], points: Sequence[int] = (50, 99), digits: int = 2) -> dict[str, float]:
    """How many ``values`` (latencies in ms) there are, their percentiles ``points`` and the largest, rounded."""
    return {"count": len(values), **{f"p{p}_ms": round(percentile(values, p), digits) for p in points},
            "max_ms": round(max(values, default=float("nan")), digits)}


def steady_window(times: Sequence[float], warmup: float = WARMUP) -> list[float]:
    """The arrivals a rate is measured on: in order, after discarding the first ``warmup`` share."""
    ordered = sorted(times)
    return ordered[int(len(ordered) * warmup):]


def steady_rate(times: Sequence[float], warmup: float = WARMUP) -> tuple[float, float]:
    """Arrivals per second after discarding the first ``warmup`` share: (rate, seconds measured)."""
    steady = steady_window(times, warmup)
    if len(steady) < 2 or steady[-1] <= steady[0]:
        return float("nan"), 0.0
    span = steady[-1] - steady[0]
    return (len(steady) - 1) / span, span


def plateau_memory(in_flight: list[tuple[float, int]], rss: list[tuple[float, float]]) -> dict[str, Any]:
    """Worker RSS while calls are in flight, over the plateau: from the first to the last moment with at least 90%
    of the peak in flight. Flat = from the moment the in-flight count first reached its peak (or the plateau's
    midpoint, if that came first, so that at least half the plateau is judged) to the end of the run, the RSS never
    rises more than ``FLAT_SHARE`` (or ``FLAT_MIB``) above its value then: the buffers of the calls in flight are
    allocated by then, and growth after it is a leak or a queue. (The start of the plateau is no reference: up to
    a tenth of the peak's calls have not started yet there, and their buffers are growth that is no leak.)"""
    peak_mib = max((mib for _, mib in rss), default=float("nan"))
    peak = max((n for _, n in in_flight), default=0)
    inside = [t for t, n in in_flight if peak and n >= 0.9 * peak]
    figures: dict[str, Any] = {"peak_mib": peak_mib, "start_mib": rss[0][1] if rss else float("nan"),
                               "end_mib": rss[-1][1] if rss else float("nan"), "flat": None,
                               "plateau_seconds": 0.0, "plateau_mean_in_flight": float("nan")}
    if not inside:
        return figures
    begin, end = inside[0], inside[-1]
    during = [mib for t, mib in rss if begin <= t <= end]
    counts = [n for t, n in in_flight if begin <= t <= end]
    figures.update(plateau_seconds=end - begin, plateau_mean_in_flight=sum(counts) / len(counts))
    if during:
        figures.update(plateau_start_mib=during[0], plateau_peak_mib=max(during))
    reached = min(t for t, n in in_flight if n == peak)
    since = min(reached, (begin + end) / 2)
    after = [mib for t, mib in rss if t >= since]
    if len(after) >= 2:
        growth = max(after) - after[0]
        figures.update(peak_reached_s=reached, judged_from_s=since, at_peak_mib=after[0],
                       after_peak_seconds=rss[-1][0] - since,
                       after_peak_growth_mib=growth, flat=growth <= max(FLAT_MIB, FLAT_SHARE * after[0]))
    return figures


def mean_of_rounds(rounds: Sequence[dict[str, Any]], side: str, key: str, side_key: str) -> float:
    """The mean of ``key`` over the completed rounds (``status`` ok) whose ``side_key`` is ``side``; NaN if none."""
    values = [r[key] for r in rounds if r.get(side_key) == side and r.get("status") == "ok"]
    return sum(values) / len(values) if values else float("nan")
