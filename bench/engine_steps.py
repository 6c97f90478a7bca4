"""Steps of ``bench/run.py`` for issue 10's targets against slow receivers.

- ``fanout``: 50 endpoints that answer after 200 ms, ONE worker process (target ≥ 900/s);
- ``slow``: one endpoint that answers after 200 ms (target ≥ 150/s);
- ``climb``: one endpoint whose latency climbs from 20 ms to 2 s once more than 50 calls
  are in flight: its concurrency (at the receiver, and the engine's window from
  ``GET /v1/endpoints/<id>`` when it reports one) and latency over time, as a PNG;
- ``inflight``: 10,000 deliveries in flight to endpoints that take 5 s, one worker
  process: its RSS over time (target < 400 MB and flat), and how many the receiver
  really had in flight.

Each step has a stack of its own (``ServiceStack``) with the service's DEFAULT settings,
pre-loads its deliveries through the API with the workers stopped, then starts the
workers and stops them when everything arrived or the step's time is up. Latency and
concurrency come from the receiver's per-request record (``bench/receiver.py``).
"""

from __future__ import annotations

import argparse
import math
import os
import time
from dataclasses import dataclass
from typing import Any, Callable

import httpx

from bench import plots
from bench.harness import PROCS, Deadline, Receiver, log
from bench.stack import DeliveryRun, ServiceStack, Tenant
from bench.stats import WARMUP, plateau_memory, steady_rate
from bench.timeline import Call, in_flight_at, latency_buckets, sample_times, window_summary

@dataclass(frozen=True)
class EnginePlan:
    """How big each of these steps is (``--quick``: small numbers, or the issue's)."""

    quick: bool
    processes: int
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
    def from_args(cls, args: argparse.Namespace) -> "EnginePlan":
        quick = args.quick
        return cls(
            quick=quick, processes=os.cpu_count() or 2,
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


# -- shared ---------------------------------------------------------------------------------------


def _pre_load_and_deliver(stack: ServiceStack, receiver: Receiver, tenant: Tenant, prefix: str, fanout: int,
                          deliveries: int, processes: int, seconds: float, deadline: Deadline,
                          sample: Callable[[], Any] | None = None) -> tuple[dict[str, Any], DeliveryRun, list[Call]]:
    """Queue about ``deliveries`` (``fanout`` per event), deliver them; the figures, the run, the calls."""
    ingest = stack.preload(tenant, math.ceil(deliveries / fanout), fanout, deadline)
    expected = ingest["events"] * fanout
    log(f"   {expected:,} deliveries queued ({ingest['events']:,} events at {ingest['rate']:,.0f}/s); "
        f"{processes} worker process(es) for at most {seconds:.0f} s")
    run = stack.deliver(receiver, prefix, expected, processes, seconds, deadline, sample)
    calls = receiver.timeline(prefix)
    figures = delivery_figures(calls, run, expected, processes)
    log(f"   {figures['arrivals']:,}/{expected:,} arrived in {figures['seconds']:.0f} s: {figures['rate']:,.1f}/s "
        f"sustained, {figures['mean_in_flight']:.1f} in flight on average, latency p50 {figures['p50_ms']:.0f} ms")
    return figures, run, calls


def delivery_figures(calls: list[Call], run: DeliveryRun, expected: int, processes: int) -> dict[str, Any]:
    """Rate after warm-up, the concurrency the receiver saw over that span, latency, worker memory."""
    arrivals = sorted(call.arrival for call in calls)
    rate, span = steady_rate(arrivals, WARMUP)
    steady = window_summary(calls, arrivals[int(len(arrivals) * WARMUP)], arrivals[-1]) if len(arrivals) > 1 else {}
    return {"processes": processes, "expected": expected, "arrivals": len(calls), "finished": run.finished,
            "seconds": run.ended - run.started, "rate": rate, "steady_seconds": span,
            "mean_in_flight": steady.get("mean_in_flight", float("nan")),
            "max_in_flight": max((call.in_flight for call in calls), default=0),
            "p50_ms": steady.get("p50_ms", float("nan")), "p99_ms": steady.get("p99_ms", float("nan")),
            "memory": run.rss.summary()}


def _slow_endpoints(stack: ServiceStack, receiver: Receiver, tenant: Tenant, prefix: str, count: int) -> None:
    for i in range(count):
        stack.endpoint(tenant, receiver.url(f"{prefix}e{i}"))


def _with_stack(name: str, body: Callable[[ServiceStack], dict[str, Any]]) -> dict[str, Any]:
    """Run ``body`` on a fresh stack (release step done, web started) with default settings; close it after."""
    stack = ServiceStack(name)
    try:
        stack.release()
        stack.start_web()
        result = body(stack)
        result["service_overrides"] = stack.overrides
        return result
    finally:
        stack.close()


# -- a. 50 slow endpoints, one worker process ----------------------------------------------------


def fanout(receiver: Receiver, plan: EnginePlan, deadline: Deadline) -> dict[str, Any]:
    """Every event goes to 50 endpoints that answer after 200 ms; ONE worker process delivers them."""
    def body(stack: ServiceStack) -> dict[str, Any]:
        tenant = stack.tenant("fanout")
        prefix = f"/slow/{plan.slow_ms}/fanout/"
        _slow_endpoints(stack, receiver, tenant, prefix, plan.slow_endpoints)
        figures, _, _ = _pre_load_and_deliver(stack, receiver, tenant, prefix, plan.slow_endpoints,
                                              plan.fanout_deliveries, 1, plan.slow_seconds, deadline)
        return {"endpoints": plan.slow_endpoints, "answer_ms": plan.slow_ms, **figures}

    return _with_stack("fanout", body)


# -- b. one slow endpoint --------------------------------------------------------------------------


def slow(receiver: Receiver, plan: EnginePlan, deadline: Deadline) -> dict[str, Any]:
    """One endpoint that answers after 200 ms; one worker process per core."""
    def body(stack: ServiceStack) -> dict[str, Any]:
        tenant = stack.tenant("slow")
        prefix = f"/slow/{plan.slow_ms}/one"
        stack.endpoint(tenant, receiver.url(prefix))
        figures, _, _ = _pre_load_and_deliver(stack, receiver, tenant, prefix, 1, plan.slow_deliveries,
                                              plan.processes, plan.slow_seconds, deadline)
        return {"answer_ms": plan.slow_ms, **figures}

    return _with_stack("slow", body)


# -- c. an endpoint whose latency climbs under load ----------------------------------------------


def concurrency_sampler(stack: ServiceStack, tenant: Tenant, endpoint: str) -> Callable[[], dict[str, Any]]:
    """Reads the engine's ``concurrency`` of an endpoint (``GET /v1/endpoints/<id>``); None where it reports none."""
    headers = {"Authorization": f"Bearer {tenant.api_key}"}

    def sample() -> dict[str, Any]:
        try:
            concurrency = stack.http.get(f"/v1/endpoints/{endpoint}", headers=headers).json().get("concurrency")
        except (httpx.HTTPError, ValueError):
            concurrency = None
        return {"t": time.time(), "concurrency": concurrency if isinstance(concurrency, dict) else None}

    return sample


def climb(receiver: Receiver, plan: EnginePlan, deadline: Deadline) -> dict[str, Any]:
    """One endpoint: 20 ms while at most 50 calls are in flight, climbing to 2 s at 100; a deep backlog."""
    def body(stack: ServiceStack) -> dict[str, Any]:
        tenant = stack.tenant("climb")
        prefix = f"/climb/{plan.climb_threshold}/{plan.climb_low_ms}/{plan.climb_high_ms}/ep"
        endpoint = stack.endpoint(tenant, receiver.url(prefix))
        figures, run, calls = _pre_load_and_deliver(
            stack, receiver, tenant, prefix, 1, plan.climb_deliveries, plan.processes, plan.slow_seconds, deadline,
            sample=concurrency_sampler(stack, tenant, endpoint))
        windows = [(s["t"] - run.started, s["concurrency"].get("window")) for s in run.samples if s["concurrency"]]
        over = sum(1 for call in calls if call.in_flight > plan.climb_threshold)
        series = _climb_series(calls, run, windows)
        plot = _climb_plot(series, windows, plan)
        result = {"threshold": plan.climb_threshold, "low_ms": plan.climb_low_ms, "high_ms": plan.climb_high_ms,
                  **figures, "arrived_over_threshold": over,
                  "share_over_threshold": over / len(calls) if calls else float("nan"),
                  "window_reported": bool(windows),
                  "window_max": max((w for _, w in windows if w is not None), default=None),
                  "window_last": windows[-1][1] if windows else None,
                  "plot": plot, "series": series}
        log(f"   {over:,} of {len(calls):,} calls arrived with more than {plan.climb_threshold} in flight; "
            f"engine window {'reported' if windows else 'not reported'}; plot {plot}")
        return result

    return _with_stack("climb", body)


def _climb_series(calls: list[Call], run: DeliveryRun, windows: list[tuple[float, Any]]) -> dict[str, list[float]]:
    """In flight at the receiver every 0.25 s, latency p50/p99 per second (seconds since the workers started)."""
    end = max([run.ended, *(call.end or call.arrival for call in calls)])
    times = sample_times(run.started, end, 0.25)
    buckets = latency_buckets(calls, run.started, 1.0)
    return {"t": [round(t - run.started, 2) for t in times], "in_flight": in_flight_at(calls, times),
            "latency_t": [round(b.start - run.started + 0.5, 2) for b in buckets],
            "latency_p50_ms": [round(b.p50_ms, 1) for b in buckets],
            "latency_p99_ms": [round(b.p99_ms, 1) for b in buckets],
            "calls_per_s": [b.count for b in buckets]}


def _climb_plot(series: dict[str, list[float]], windows: list[tuple[float, Any]], plan: EnginePlan) -> str:
    lines = [plots.Line("in flight at the receiver", series["t"], series["in_flight"])]
    if windows:
        lines.append(plots.Line("engine window (GET /v1/endpoints/<id>)", [t for t, _ in windows],
                                [w for _, w in windows], "step"))
    title = (f"Endpoint slowing from {plan.climb_low_ms} ms to {plan.climb_high_ms / 1000:g} s above "
             f"{plan.climb_threshold} calls in flight (default settings)")
    path = plots.time_series_png(PROCS.log_dir / "climb.png", title, [
        plots.Panel("calls in flight", lines, marks=[(plan.climb_threshold, f"{plan.climb_threshold}: latency climbs")]),
        plots.Panel("latency (ms)", [plots.Line("p50 per second", series["latency_t"], series["latency_p50_ms"]),
                                     plots.Line("p99 per second", series["latency_t"], series["latency_p99_ms"])],
                    log_y=True),
        plots.Panel("deliveries per second", [plots.Line("arrivals", series["latency_t"], series["calls_per_s"])]),
    ])
    return path.name


# -- e. 10,000 in flight to endpoints that take 5 s ---------------------------------------------


def inflight(receiver: Receiver, plan: EnginePlan, deadline: Deadline) -> dict[str, Any]:
    """Sixteen times ``inflight_target`` deliveries to endpoints answering after 5 s, one worker process, for a
    fixed time: enough per endpoint for its window to grow to the ceiling (slow start doubles it about every 10 s
    for a 5 s answer, so about a minute) and then stay there for about a minute (80,000 ran out after 90 s)."""
    def body(stack: ServiceStack) -> dict[str, Any]:
        tenant = stack.tenant("inflight")
        prefix = f"/slow/{plan.inflight_ms}/inflight/"
        _slow_endpoints(stack, receiver, tenant, prefix, plan.inflight_endpoints)
        figures, run, calls = _pre_load_and_deliver(stack, receiver, tenant, prefix, plan.inflight_endpoints,
                                                    16 * plan.inflight_target, 1, plan.inflight_seconds, deadline)
        times = sample_times(run.started, run.ended, 1.0)
        in_flight = in_flight_at(calls, times)
        rss_t = [offset + run.rss.wall_t0 for offset, _ in run.rss.samples]
        rss = run.rss.largest_process_mib()
        memory = plateau_memory(list(zip(times, in_flight)), list(zip(rss_t, rss)))
        series = {"t": [round(t - run.started, 1) for t in times], "in_flight": in_flight,
                  "rss_t": [round(t - run.started, 1) for t in rss_t], "rss_mib": [round(x, 1) for x in rss]}
        plot = plots.time_series_png(PROCS.log_dir / "inflight.png",
                                     f"{figures['expected']:,} deliveries to {plan.inflight_endpoints} endpoints "
                                     f"answering after {plan.inflight_ms / 1000:g} s, one worker process (default settings)", [
            plots.Panel("calls in flight at the receiver", [plots.Line("in flight", series["t"], series["in_flight"])],
                        marks=[(plan.inflight_target, f"target {plan.inflight_target:,}")]),
            plots.Panel("worker RSS (MiB)", [plots.Line("largest worker process", series["rss_t"], series["rss_mib"])],
                        marks=[(400 * 1e6 / 2**20, "400 MB")]),
        ]).name
        log(f"   in flight at the receiver: peak {max(in_flight, default=0):,}, plateau mean "
            f"{memory['plateau_mean_in_flight']:.0f}; worker RSS peak {memory['peak_mib']:.0f} MiB, "
            f"flat: {memory['flat']}")
        return {"target": plan.inflight_target, "endpoints": plan.inflight_endpoints, "answer_ms": plan.inflight_ms,
                **figures, "peak_in_flight": max(in_flight, default=0), **memory, "plot": plot, "series": series}

    return _with_stack("inflight", body)
