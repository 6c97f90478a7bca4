"""Steps ``fanout``, ``slow``, ``climb`` and ``inflight``: the service against slow receivers (issue 10; what each
sends where: its function's docstring; its targets: the constants below).

Each has a stack of its own with the service's DEFAULT settings, pre-loads its deliveries through the API with
the workers stopped, then starts the workers and stops them when everything arrived or its time is up. Latency
and concurrency come from the receiver's per-request record (``bench/kit/receiver.py``).
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import httpx

from bench.kit import plots
from bench.kit.markdown import Add, Section, mib, n, ok, overrides, section_of, why
from bench.kit.plan import Plan
from bench.kit.procs import PROCS, Deadline, log
from bench.kit.receiver_process import Receiver
from bench.kit.stack import DeliveryRun, ServiceStack, Tenant, running
from bench.kit.stats import WARMUP, plateau_memory, steady_rate
from bench.kit.step import Context, Results, Step
from bench.kit.timeline import Call, in_flight_at, latency_buckets, sample_times, window_summary

#: Targets of issue 10.
FANOUT_TARGET = 900.0
SLOW_TARGET = 150.0
RSS_TARGET_MB = 400.0

#: The climbing endpoint counts as backed off when fewer than this share of its calls arrived
#: with more than the threshold in flight (and the engine reports the window it keeps).
CLIMB_OVER_SHARE = 0.10

#: The in-flight step counts only if the receiver really held the whole target at its peak.
INFLIGHT_REACHED = 1.0


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
    # The rate after warm-up; the concurrency the receiver saw over that span, and its latency.
    arrivals = sorted(call.arrival for call in calls)
    rate, span = steady_rate(arrivals, WARMUP)
    steady = window_summary(calls, arrivals[int(len(arrivals) * WARMUP)], arrivals[-1]) if len(arrivals) > 1 else {}
    figures = {"processes": processes, "expected": expected, "arrivals": len(calls), "finished": run.finished,
               "seconds": run.ended - run.started, "rate": rate, "steady_seconds": span,
               "mean_in_flight": steady.get("mean_in_flight", float("nan")),
               "max_in_flight": max((call.in_flight for call in calls), default=0),
               "p50_ms": steady.get("p50_ms", float("nan")), "p99_ms": steady.get("p99_ms", float("nan")),
               "memory": run.rss.summary()}
    log(f"   {figures['arrivals']:,}/{expected:,} arrived in {figures['seconds']:.0f} s: {figures['rate']:,.1f}/s "
        f"sustained, {figures['mean_in_flight']:.1f} in flight on average, latency p50 {figures['p50_ms']:.0f} ms")
    return figures, run, calls


def _to_slow_endpoints(stack: ServiceStack, receiver: Receiver, name: str, answer_ms: int, endpoints: int,
                       deliveries: int, seconds: float, deadline: Deadline,
                       processes: int = 1) -> tuple[dict[str, Any], DeliveryRun, list[Call]]:
    """About ``deliveries`` to a tenant's ``endpoints`` endpoints that answer after ``answer_ms`` (each event to
    every one), delivered by ``processes`` worker processes."""
    tenant = stack.tenant(name)
    prefix = f"/slow/{answer_ms}/{name}/"
    for i in range(endpoints):
        stack.endpoint(tenant, receiver.url(f"{prefix}e{i}"))
    return _pre_load_and_deliver(stack, receiver, tenant, prefix, endpoints, deliveries, processes, seconds, deadline)


def fanout(context: Context, deadline: Deadline) -> Results:
    """Every event goes to 50 endpoints that answer after 200 ms; ONE worker process delivers them."""
    receiver, plan = context.receiver, context.plan
    with running("fanout") as stack:
        figures, _, _ = _to_slow_endpoints(stack, receiver, "fanout", plan.slow_ms, plan.slow_endpoints,
                                           plan.fanout_deliveries, plan.slow_seconds, deadline)
        return {"endpoints": plan.slow_endpoints, "answer_ms": plan.slow_ms, **figures,
                "service_overrides": stack.overrides}


def slow(context: Context, deadline: Deadline) -> Results:
    """One endpoint that answers after 200 ms; one worker process per core."""
    receiver, plan = context.receiver, context.plan
    with running("slow") as stack:
        figures, _, _ = _to_slow_endpoints(stack, receiver, "slow", plan.slow_ms, 1, plan.slow_deliveries,
                                           plan.slow_seconds, deadline, plan.processes)
        return {"answer_ms": plan.slow_ms, **figures, "service_overrides": stack.overrides}


def climb(context: Context, deadline: Deadline) -> Results:
    """One endpoint: 20 ms while at most 50 calls are in flight, climbing to 2 s at 100; a deep backlog. Its calls in
    flight at the receiver, the engine's window for it and the latency over time, as a PNG."""
    receiver, plan = context.receiver, context.plan
    with running("climb") as stack:
        tenant = stack.tenant("climb")
        prefix = f"/climb/{plan.climb_threshold}/{plan.climb_low_ms}/{plan.climb_high_ms}/ep"
        endpoint = stack.endpoint(tenant, receiver.url(prefix))

        def sample() -> dict[str, Any]:
            """The engine's ``concurrency`` of the endpoint (``GET /v1/endpoints/<id>``); None where it reports none."""
            try:
                answer = stack.http.get(f"/v1/endpoints/{endpoint}", headers={"Authorization": f"Bearer {tenant.api_key}"})
                concurrency = answer.json().get("concurrency")
            except (httpx.HTTPError, ValueError):
                concurrency = None
            return {"t": time.time(), "concurrency": concurrency if isinstance(concurrency, dict) else None}

        figures, run, calls = _pre_load_and_deliver(stack, receiver, tenant, prefix, 1, plan.climb_deliveries,
                                                    plan.processes, plan.slow_seconds, deadline, sample)
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
        return {**result, "service_overrides": stack.overrides}


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


def _climb_plot(series: dict[str, list[float]], windows: list[tuple[float, Any]], plan: Plan) -> str:
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


def inflight(context: Context, deadline: Deadline) -> Results:
    """Sixteen times ``inflight_target`` deliveries to endpoints answering after 5 s, one worker process, for a
    fixed time: enough per endpoint for its window to grow to the ceiling (slow start doubles it about every 10 s
    for a 5 s answer, so about a minute) and then stay there for about a minute (80,000 ran out after 90 s)."""
    receiver, plan = context.receiver, context.plan
    with running("inflight") as stack:
        figures, run, calls = _to_slow_endpoints(stack, receiver, "inflight", plan.inflight_ms, plan.inflight_endpoints,
                                                 16 * plan.inflight_target, plan.inflight_seconds, deadline)
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
                **figures, "peak_in_flight": max(in_flight, default=0), **memory, "plot": plot, "series": series,
                "service_overrides": stack.overrides}


def table_section(r: dict[str, Any], add: Add) -> None:
    add("### Slow receivers")
    add("")
    add("Deliveries pre-loaded through the API with the workers stopped, then delivered; a step stops when all "
        "arrived or its time is up. Rate: arrivals per second after the first 10%; in flight: requests the receiver "
        "held at once, averaged over that span (and the most any request found on arrival); latency: the "
        "receiver's answer time, so it shows the endpoint, not the service.")
    add("")
    add("| step | deliveries | worker processes | sustained deliveries/s | in flight, mean (max) | latency p50 / p99 "
        "| worker peak RSS | settings |")
    add("|---|---|---|---|---|---|---|---|")
    for key, label in (("fanout", "50 endpoints answering after 200 ms"), ("slow", "1 endpoint answering after 200 ms"),
                       ("climb", "1 endpoint slowing above 50 in flight"),
                       ("inflight", "endpoints answering after 5 s")):
        step = r.get(key)
        if not ok(step):
            add(f"| {label} | {why(step)} | | | | | | |")
            continue
        done = f"{step['arrivals']:,} of {step['expected']:,}" + ("" if step["finished"] else
                                                                  f" (stopped at {step['seconds']:.0f} s)")
        add(f"| {label} | {done} | {step['processes']} | **{n(step['rate'], 1)}** | {n(step['mean_in_flight'], 1)} "
            f"({step['max_in_flight']:,}) | {n(step['p50_ms'])} / {n(step['p99_ms'])} ms | {mib(step['memory'])} | "
            f"{overrides(step)} |")
    add("")


def _plotted(title: str, key: str, alt: str, text: Callable[[dict[str, Any]], str]) -> Section:
    """A section of the report: what step ``key`` saw, in words, and its plot."""
    def section(step: dict[str, Any], r: dict[str, Any], add: Add) -> None:
        add(text(step))
        add("")
        add(f"![{alt}]({step['plot']})")
        add("")

    return section_of(key, title)(section)


def _climb_text(step: dict[str, Any]) -> str:
    threshold = step["threshold"]
    window = (f"max {step['window_max']}, last {step['window_last']}." if step["window_reported"]
              else "not reported by this version of the service.")
    return (f"`bench/kit/receiver.py` answers after {step['low_ms']} ms while at most {threshold} calls to the "
            f"endpoint are in flight; above, the delay climbs linearly to {step['high_ms'] / 1000:g} s at {2 * threshold}. "
            f"{step['expected']:,} deliveries queued for it; {step['processes']} worker processes. "
            f"{step['arrived_over_threshold']:,} of {step['arrivals']:,} calls ({step['share_over_threshold']:.1%}) "
            f"arrived with more than {threshold} in flight. "
            f"The engine's window (`concurrency.window` of `GET /v1/endpoints/<id>`, sampled every 0.5 s): {window}")


def _inflight_text(step: dict[str, Any]) -> str:
    return (f"{step['expected']:,} deliveries to {step['endpoints']} endpoints that answer after "
            f"{step['answer_ms'] / 1000:g} s, one worker process, for {step['seconds']:.0f} s. The receiver held at most "
            f"**{step['peak_in_flight']:,}** at once (target {step['target']:,}); over the plateau (≥ 90% of that peak, "
            f"{step['plateau_seconds']:.0f} s) {n(step['plateau_mean_in_flight'])} on average. Worker RSS, largest process, "
            f"every second: start {n(step['start_mib'])} MiB, peak {n(step['peak_mib'])} MiB, end {n(step['end_mib'])} MiB; "
            f"over the plateau {n(step.get('plateau_start_mib'))} → peak {n(step.get('plateau_peak_mib'))} MiB; "
            f"when the in-flight count first reached its peak (or at the plateau's midpoint, if that came first) "
            f"{n(step.get('at_peak_mib'))} MiB, and over the {n(step.get('after_peak_seconds'))} s after it at most "
            f"{n(step.get('after_peak_growth_mib'))} MiB more "
            "(flat: from that moment on it never rises more than 10% or 16 MiB above its value then).")


climb_section = _plotted("An endpoint that slows down under load", "climb",
                         "in flight, window and latency of the slowing endpoint over time", _climb_text)
inflight_section = _plotted("Deliveries in flight to endpoints that take 5 s", "inflight",
                            "in flight and worker memory over time", _inflight_text)


FANOUT = Step("fanout", "50 endpoints answering after 200 ms, one worker process", fanout,
              lambda context: 600 * context.budget, (table_section,))
SLOW = Step("slow", "one endpoint answering after 200 ms", slow, lambda context: 600 * context.budget)
CLIMB = Step("climb", "an endpoint slowing down above 50 calls in flight", climb, lambda context: 600 * context.budget,
             (climb_section,))
INFLIGHT = Step("inflight", "deliveries in flight to endpoints taking 5 s", inflight,
                lambda context: 600 * context.budget, (inflight_section,))
