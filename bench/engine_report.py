"""The parts of ``bench/RESULTS.md`` for issue 10 (the asyncio delivery engine): its targets
table and the sections of the slow-receiver steps (``bench/engine_steps.py``, ``bench/flood.py``),
with the plots they wrote linked."""

from __future__ import annotations

from typing import Any

from bench.report_common import (
    Add,
    heading,
    ladder_row,
    latency_row,
    mib,
    n,
    ok,
    overrides,
    peer_ratio_row,
    service_rate,
    verdict,
    why,
)

#: The keys of these steps in the results (and their ``--only`` names).
STEPS = ("fanout", "slow", "climb", "flood", "inflight")

#: Targets of issue 10.
FANOUT_TARGET = 900.0
SLOW_TARGET = 150.0
FLOOD_P99_MS = 250.0
LATENCY_P99_MS = 50.0
RSS_TARGET_MB = 400.0

#: The climbing endpoint counts as backed off when fewer than this share of its calls arrived
#: with more than the threshold in flight (and the engine reports the window it keeps).
CLIMB_OVER_SHARE = 0.10

#: The in-flight step counts only if the receiver really held the whole target at its peak.
INFLIGHT_REACHED = 1.0


def service_settings_note(r: dict[str, Any], step: dict[str, Any] | None = None) -> str:
    """The defaults of the knobs that bound concurrency in the checkout measured, as Markdown
    (those ``step`` changed left out: its text names them)."""
    changed = (step or {}).get("service_overrides") or {}
    defaults = {k: v for k, v in (r.get("service_defaults") or {}).items() if k not in changed}
    return ", ".join(f"`{k}={v:g}`" if isinstance(v, float) else f"`{k}={v}`" for k, v in defaults.items()) or "–"


# -- targets ---------------------------------------------------------------------------------------


def targets(r: dict[str, Any], add: Add) -> None:
    add("### Targets of issue 10 (delivery engine)")
    add("")
    add(f"The service's settings are its defaults ({service_settings_note(r)}) in every step except where the "
        "sections below name an exception.")
    add("")
    add("| target | measured | verdict |")
    add("|---|---|---|")
    add(peer_ratio_row(r, "dramatiq", 2))
    add(peer_ratio_row(r, "celery", 2))
    add(_async_floor_row(r))
    add(_rate_row(r.get("fanout"), f"50 endpoints answering after 200 ms, one worker process: ≥ {FANOUT_TARGET:,.0f}/s",
                  FANOUT_TARGET))
    add(_rate_row(r.get("slow"), f"one endpoint answering after 200 ms: ≥ {SLOW_TARGET:,.0f}/s", SLOW_TARGET))
    add(_climb_row(r.get("climb")))
    add(_flood_row(r.get("flood")))
    add(_inflight_row(r.get("inflight")))
    add(latency_row(r, LATENCY_P99_MS))
    add(ladder_row(r))
    add("| chaos run loses nothing, duplicates < 0.5 % | not part of `bench/run.py` (`bench/chaos.py` stops the "
        "shared broker and database) | not measured |")
    add("")


def _async_floor_row(r: dict[str, Any]) -> str:
    service, floor = service_rate(r), r.get("peers", {}).get("async-floor")
    if service and ok(floor):
        return (f"| service ÷ async floor (reported, no target) | {service / floor['rate']:.2f} × ({n(service)} vs "
                f"{n(floor['rate'])} deliveries/s) | – |")
    return "| service ÷ async floor (reported, no target) | – | not measured |"


def _rate_row(step: Any, target: str, minimum: float) -> str:
    if not ok(step):
        return f"| {target} | {why(step)} | not measured |"
    cut = "" if step["finished"] else f"; stopped after {step['seconds']:.0f} s with {step['arrivals']:,} of " \
                                      f"{step['expected']:,} delivered"
    return (f"| {target} | {n(step['rate'], 1)}/s ({n(step['mean_in_flight'], 1)} in flight on average{cut}) | "
            f"{verdict(step['rate'] >= minimum)} |")


def _climb_row(step: Any) -> str:
    target = (f"endpoint slowing from 20 ms to 2 s above 50 in flight is backed off (< {CLIMB_OVER_SHARE:.0%} of calls "
              "above 50, window reported)")
    if not ok(step):
        return f"| {target} | {why(step)} | not measured |"
    window = (f"window reported, max {step['window_max']}, last {step['window_last']}" if step["window_reported"]
              else "no window reported by `GET /v1/endpoints/<id>`")
    met = step["window_reported"] and step["share_over_threshold"] < CLIMB_OVER_SHARE
    return (f"| {target} | {step['share_over_threshold']:.1%} of calls above {step['threshold']}; "
            f"{n(step['rate'], 1)}/s; {window}; [plot]({step['plot']}) | {verdict(met)} |")


def _flood_row(step: Any) -> str:
    target = f"tenant flood: B's p99 POST→arrival < {FLOOD_P99_MS:g} ms while A drains"
    if not ok(step):
        return f"| {target} | {why(step)} | not measured |"
    during = step["b_during"]
    met = during["delivered"] > 0 and during["missing"] == 0 and during["p99_ms"] < FLOOD_P99_MS and step["a_drained"]
    drained = f"A drained {step['a_accepted']:,} events in {n(step['a_drain_seconds'], 1)} s" if step["a_drained"] else \
        f"A **not drained** ({step['a_arrivals']:,} of {step['a_accepted']:,} in {n(step['a_drain_seconds'], 0)} s)"
    missing = f", {during['missing']} not delivered" if during["missing"] else ""
    return (f"| {target} | p99 {n(during['p99_ms'], 0)} ms, p50 {n(during['p50_ms'], 0)} ms ({during['sent']} events"
            f"{missing}); {drained} | {verdict(met)} |")


def _inflight_row(step: Any) -> str:
    target = f"10,000 in flight to endpoints taking 5 s: worker RSS < {RSS_TARGET_MB:g} MB and flat"
    if not ok(step):
        return f"| {target} | {why(step)} | not measured |"
    peak_mb = step["peak_mib"] * 2**20 / 1e6
    reached = step["peak_in_flight"] >= INFLIGHT_REACHED * step["target"]
    flat = {True: "flat", False: "**not flat**", None: "flatness not judged (no plateau)"}[step["flat"]]
    met = reached and peak_mb < RSS_TARGET_MB and step["flat"] is True
    return (f"| {target} | {step['peak_in_flight']:,} in flight at the receiver at the peak (target "
            f"{step['target']:,}); RSS peak {peak_mb:.0f} MB, {flat}; [plot]({step['plot']}) | "
            f"{verdict(met)}{'' if reached else ' (the in-flight premise was not reached)'} |")


# -- sections --------------------------------------------------------------------------------------


def sections(r: dict[str, Any], add: Add) -> None:
    _slow_receivers(r, add)
    _climb(r, add)
    _inflight(r, add)
    _flood(r, add)


def _slow_receivers(r: dict[str, Any], add: Add) -> None:
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


def _climb(r: dict[str, Any], add: Add) -> None:
    step = r.get("climb")
    if not heading(add, "An endpoint that slows down under load", step):
        return
    add(f"`bench/receiver.py` answers after {step['low_ms']} ms while at most {step['threshold']} calls to the "
        f"endpoint are in flight; above, the delay climbs linearly to {step['high_ms'] / 1000:g} s at "
        f"{2 * step['threshold']}. {step['expected']:,} deliveries queued for it; {step['processes']} worker processes. "
        f"{step['arrived_over_threshold']:,} of {step['arrivals']:,} calls ({step['share_over_threshold']:.1%}) arrived "
        f"with more than {step['threshold']} in flight. The engine's window (`concurrency.window` of "
        f"`GET /v1/endpoints/<id>`, sampled every 0.5 s): "
        + (f"max {step['window_max']}, last {step['window_last']}." if step["window_reported"] else
           "not reported by this version of the service."))
    add("")
    add(f"![in flight, window and latency of the slowing endpoint over time]({step['plot']})")
    add("")


def _inflight(r: dict[str, Any], add: Add) -> None:
    step = r.get("inflight")
    if not heading(add, "Deliveries in flight to endpoints that take 5 s", step):
        return
    add(f"{step['expected']:,} deliveries to {step['endpoints']} endpoints that answer after "
        f"{step['answer_ms'] / 1000:g} s, one worker process, for {step['seconds']:.0f} s. The receiver held at most "
        f"**{step['peak_in_flight']:,}** at once (target {step['target']:,}); over the plateau (≥ 90% of that peak, "
        f"{step['plateau_seconds']:.0f} s) {n(step['plateau_mean_in_flight'])} on average. Worker RSS, largest process, "
        f"every second: start {n(step['start_mib'])} MiB, peak {n(step['peak_mib'])} MiB, end {n(step['end_mib'])} MiB; "
        f"over the plateau {n(step.get('plateau_start_mib'))} → peak {n(step.get('plateau_peak_mib'))} MiB; "
        f"when the in-flight count first reached its peak (or at the plateau's midpoint, if that came first) "
        f"{n(step.get('at_peak_mib'))} MiB, and over the {n(step.get('after_peak_seconds'))} s after it at most "
        f"{n(step.get('after_peak_growth_mib'))} MiB more "
        "(flat: from that moment on it never rises more than 10% or 16 MiB above its value then).")
    add("")
    add(f"![in flight and worker memory over time]({step['plot']})")
    add("")


def _flood(r: dict[str, Any], add: Add) -> None:
    step = r.get("flood")
    if not heading(add, "Tenant flood", step):
        return
    how = f"in batches of {step.get('batch_size', 200)} (`POST /v1/events/batch`)" if step["batch"] else "one event a request (`POST /v1/events`)"
    statuses = ", ".join(f"{k}: {v:,}" for k, v in sorted(step["a_post_statuses"].items())) or "–"
    add(f"Tenant A posts {step['events']:,} events at once for its {step['endpoints']} endpoints (each subscribed to "
        f"an event type of its own, so {step['events'] // step['endpoints']:,} each), {how}, 2 load processes × 32 "
        f"connections; a 429 waits its `Retry-After` (answers: {statuses}). Tenant B posts one event every "
        f"{step['b_interval_ms']:.0f} ms to its one endpoint. {step['processes']} worker processes; settings: "
        f"{overrides(step)}.")
    add("")
    add("| figure | value |")
    add("|---|---|")
    add(f"| A: events accepted, posting time | {step['a_accepted']:,} in {n(step['a_posting_seconds'], 1)} s |")
    add(f"| A: first POST → last arrival (drain time) | **{n(step['a_drain_seconds'], 1)} s** "
        f"({n(step['a_rate'])} deliveries/s){'' if step['a_drained'] else ', **not drained**'} |")
    for key, label in (("b_quiet", "B before the flood"), ("b_during", "**B while A drains**"),
                       ("b_posting", "B while A drains, posted while A's batches were still being accepted"),
                       ("b_after_posting", "B while A drains, posted after A's last batch was accepted")):
        b = step.get(key)
        if b is None:  # a run from before the split
            continue
        add(f"| {label}: POST start → arrival | p50 {n(b['p50_ms'])} ms, p99 {n(b['p99_ms'])} ms, max "
            f"{n(b['max_ms'])} ms ({b['delivered']} of {b['sent']} delivered); of which the POST until its 202: "
            f"p50 {n(b.get('post_p50_ms'))} ms, p99 {n(b.get('post_p99_ms'))} ms; from the 202 to the arrival: "
            f"p50 {n(b.get('after_answer_p50_ms'))} ms, p99 {n(b.get('after_answer_p99_ms'))} ms"
            + "".join(f"; {name}: p50 {n(v['p50_ms'])} ms, p99 {n(v['p99_ms'])} ms" for name, v in b.get("stages", {}).items())
            + " |")
    add("")
