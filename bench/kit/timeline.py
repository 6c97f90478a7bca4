"""What a receiver saw over time (``/_bench/timeline`` of ``bench/kit/receiver.py``): calls in flight at any
moment, latency per time bucket. Standard library only (the tests import it from the service's virtualenv)."""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from typing import Sequence

from bench.kit.stats import percentile


@dataclass(frozen=True)
class Call:
    """One request as the receiver recorded it (wall-clock seconds)."""

    arrival: float
    #: When it was answered or abandoned; None while pending.
    end: float | None
    #: ``a`` answered, ``x`` the client closed first, ``p`` pending.
    outcome: str
    #: Requests to its path in flight when it arrived, itself included.
    in_flight: int
    webhook_id: str
    path: str

    @property
    def latency(self) -> float | None:
        """Seconds from arrival to answer; None unless answered."""
        return self.end - self.arrival if self.outcome == "a" and self.end is not None else None


def parse_timeline(text: str) -> list[Call]:
    """The lines of ``GET /_bench/timeline``: ``<arrival> <end|-> <outcome> <in flight> <webhook-id> <path>``."""
    calls = []
    for line in text.splitlines():
        arrival, end, outcome, in_flight, webhook_id, path = line.split(" ", 5)
        calls.append(Call(float(arrival), None if end == "-" else float(end), outcome, int(in_flight),
                          webhook_id, path))
    return calls


def in_flight_at(calls: Sequence[Call], times: Sequence[float]) -> list[int]:
    """How many of ``calls`` had arrived and not yet ended at each of ``times``."""
    arrivals = sorted(call.arrival for call in calls)
    ends = sorted(math.inf if call.end is None else call.end for call in calls)
    return [bisect_right(arrivals, t) - bisect_right(ends, t) for t in times]


def mean_in_flight(calls: Sequence[Call], start: float, end: float) -> float:
    """Calls in flight between ``start`` and ``end``, averaged over time (the effective concurrency)."""
    if end <= start:
        return float("nan")
    busy = 0.0
    for call in calls:
        finish = end if call.end is None else min(call.end, end)
        busy += max(0.0, finish - max(call.arrival, start))
    return busy / (end - start)


def sample_times(start: float, end: float, step: float) -> list[float]:
    """``start``, ``start + step``, … up to ``end`` included."""
    count = int((end - start) / step) + 1 if end >= start else 0
    return [start + i * step for i in range(count)]


@dataclass(frozen=True)
class Bucket:
    """Answered calls that arrived in ``[start, start + width)``."""

    start: float
    count: int
    p50_ms: float
    p99_ms: float


def latency_buckets(calls: Sequence[Call], origin: float, width: float) -> list[Bucket]:
    """Latency percentiles of the answered calls per ``width`` seconds of arrival, from ``origin``."""
    grouped: dict[int, list[float]] = {}
    for call in calls:
        if call.latency is not None:
            grouped.setdefault(int((call.arrival - origin) // width), []).append(call.latency * 1000)
    return [Bucket(origin + key * width, len(values), percentile(values, 50), percentile(values, 99))
            for key, values in sorted(grouped.items())]


def window_summary(calls: Sequence[Call], start: float, end: float) -> dict[str, float]:
    """Rate, effective concurrency and latency of the calls that arrived in ``[start, end)``."""
    inside = [call for call in calls if start <= call.arrival < end]
    latencies = [call.latency * 1000 for call in inside if call.latency is not None]
    seconds = end - start
    return {"seconds": seconds, "arrivals": len(inside), "rate": len(inside) / seconds if seconds > 0 else float("nan"),
            "mean_in_flight": mean_in_flight(calls, start, end),
            "max_in_flight_at_arrival": max((call.in_flight for call in inside), default=0),
            "p50_ms": percentile(latencies, 50), "p99_ms": percentile(latencies, 99),
            "abandoned": sum(1 for call in inside if call.outcome == "x")}
