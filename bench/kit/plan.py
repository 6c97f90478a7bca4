"""How big each step of a run is: small numbers with ``--quick``, the issues' numbers otherwise. ``results.json``
keeps it, so a report rendered later from it states the numbers the run used."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Plan:
    """How big each step is (``--quick`` or the full issue)."""

    quick: bool
    #: Worker processes of every contender: one per core.
    processes: int
    #: Messages of each throughput contender (steps ``peers``, ``service``); the rest are named after their steps.
    events: int
    latency_rate: float
    latency_seconds: float
    noisy_events: int
    noisy_timeout: float
    ladder: str
    ladder_first: int
    ladder_second: int
    ladder_second_seconds: float
    backlog: int
    backlog_timeout: float
    release_rate: float
    receiver_seconds: int
    slow_ms: int
    slow_endpoints: int
    fanout_deliveries: int
    slow_deliveries: int
    slow_seconds: float
    climb_threshold: int
    climb_low_ms: int
    climb_high_ms: int
    climb_deliveries: int
    inflight_target: int
    inflight_endpoints: int
    inflight_ms: int
    inflight_seconds: float
    flood_events: int
    flood_endpoints: int
    flood_interval: float
    flood_seconds: float

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "Plan":
        quick = args.quick
        return cls(
            quick=quick, processes=os.cpu_count() or 2,
            events=args.events or (3000 if quick else 20_000),
            latency_rate=200.0, latency_seconds=15.0 if quick else 60.0,
            noisy_events=300 if quick else 2000, noisy_timeout=5.0,
            ladder="2s,10s,30s", ladder_first=150 if quick else 1000, ladder_second=150 if quick else 1000,
            ladder_second_seconds=20.0,
            backlog=args.backlog or (5000 if quick else 100_000),
            backlog_timeout=420.0 if quick else 7200.0,
            release_rate=args.release_rate,
            receiver_seconds=5 if quick else 10,
            slow_ms=200, slow_endpoints=50,
            fanout_deliveries=2_500 if quick else 20_000,
            slow_deliveries=600 if quick else 6_000,
            slow_seconds=60.0 if quick else 300.0,
            climb_threshold=50, climb_low_ms=20, climb_high_ms=2000,
            climb_deliveries=3_000 if quick else 20_000,
            inflight_target=1_000 if quick else 10_000, inflight_endpoints=20 if quick else 100, inflight_ms=5000,
            inflight_seconds=40.0 if quick else 150.0,
            flood_events=2_000 if quick else 20_000, flood_endpoints=10, flood_interval=0.1,
            flood_seconds=180.0 if quick else 900.0,
        )
