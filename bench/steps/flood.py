"""Steps ``flood`` and ``flood_fanout``: one tenant's flood must not hold back another tenant.

Tenant A posts its events at once, in batches (a ``429`` waits its ``Retry-After`` and is sent again, as a
well-behaved client does), to 10 endpoints of an event type each (``flood_fanout``: each subscribed to all, 10
deliveries an event); tenant B posts one event every ``plan.flood_interval`` to its own. Figures: B's latency
from the start of its POST to the arrival while A drains, and A's drain time (first POST to last arrival).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

from bench.kit.markdown import Add, n, overrides, section_of
from bench.kit.payload import batch_request
from bench.kit.procs import PROCS, Deadline, log
from bench.kit.receiver_process import Receiver
from bench.kit.stack import Load, ServiceStack, Tenant, running
from bench.kit.step import Context, Results, Step

#: Target of issue 10: B's p99 from its POST to the arrival while A drains.
FLOOD_P99_MS = 250.0

#: Events per ``POST /v1/events/batch``: 200 of ~1 KB stay under the default ``MAX_BODY_BYTES`` (256 KiB).
BATCH = 200

#: Load generator processes and connections in each while A posts its flood.
FLOOD_PROCESSES, FLOOD_CONNECTIONS = 2, 32

#: Seconds B posts before the flood starts: its latency on a quiet service, for comparison.
QUIET_SECONDS = 3.0

#: Seconds allowed, once B stops posting, for B's last events to arrive.
B_SETTLE_SECONDS = 15.0


def _start_flood(stack: ServiceStack, tenant: Tenant, event_types: list[str], events: int) -> Load:
    """Start the load generator posting ``events`` events spread evenly over ``event_types``, in batches."""
    per_type = BATCH // len(event_types)
    body = batch_request([t for t in event_types for _ in range(per_type)])
    return stack.start_load("burst", tenant.api_key, [body], -(-events // (per_type * len(event_types))),
                            "--processes", str(FLOOD_PROCESSES), "--connections", str(FLOOD_CONNECTIONS),
                            path="/v1/events/batch")


def _flood_events(stack: ServiceStack, tenant: Tenant) -> int:
    return stack.sql.value("SELECT count(*) FROM event WHERE tenant_id = %s AND event_type LIKE 'flood.%%'",
                           (tenant.id,))


def flood(context: Context, deadline: Deadline, fanout: bool = False) -> Results:
    """Tenant A's flood beside tenant B's trickle: B's latency while A drains, and A's drain time."""
    receiver, plan = context.receiver, context.plan
    with running("flood_fanout" if fanout else "flood") as stack:
        a, b = stack.tenant("flood-a"), stack.tenant("flood-b")
        event_types = [f"flood.t{i}" for i in range(plan.flood_endpoints)]
        for i, event_type in enumerate(event_types):
            stack.endpoint(a, receiver.url(f"/flood/a/e{i}"), event_types=event_types if fanout else [event_type])
        b_path = "/flood/b"
        stack.endpoint(b, receiver.url(b_path))
        stack.start_workers(plan.processes)
        time.sleep(2.0)  # workers connected and consuming
        b_sender = stack.start_paced(b, int(plan.flood_seconds / plan.flood_interval), 1 / plan.flood_interval)
        time.sleep(QUIET_SECONDS)
        log(f"   tenant A floods {plan.flood_events:,} events (batches of {BATCH}); "
            f"tenant B posts one every {plan.flood_interval * 1000:.0f} ms")
        flood_started = time.time()
        poster = _start_flood(stack, a, event_types, plan.flood_events)
        # Until A's flood is posted and delivered, or its time is up (then the figures say so).
        give_up = time.monotonic() + min(deadline.left() - 60, plan.flood_seconds)
        posted_at, accepted, drained = None, None, False
        while time.monotonic() < give_up:
            if posted_at is None and not poster.child.alive():
                posted_at, accepted = time.time(), _flood_events(stack, a)
                log(f"   A's {accepted:,} events accepted in {posted_at - flood_started:.1f} s")
            if accepted is not None and receiver.count("/flood/a/") >= accepted * (len(event_types) if fanout else 1):
                drained = True
                break
            deadline.check()
            stack.check_alive()
            time.sleep(0.5)
        if not drained:
            log(f"   A not drained within {plan.flood_seconds:.0f} s")
            PROCS.stop(poster.child, grace=5.0)
            accepted = _flood_events(stack, a)
            posted_at = posted_at or time.time()
        drained_at = time.time()
        b_rows = b_sender.results()
        b_accepted = {row["id"] for row in b_rows if row["status"] == 202 and row["id"]}
        settle = time.monotonic() + B_SETTLE_SECONDS
        while len({w for _, w, _ in receiver.dump(b_path)} & b_accepted) < len(b_accepted) and time.monotonic() < settle:
            time.sleep(0.5)
        stack.stop_workers()
        posting = json.loads(poster.out.read_text()) if poster.out.exists() else {}
        return {"events": plan.flood_events, "endpoints": plan.flood_endpoints, "fanout": fanout, "batch": True,
                "batch_size": BATCH,
                "a_accepted": accepted, "a_drained": drained, "a_posting_seconds": posted_at - flood_started,
                "a_post_statuses": posting.get("statuses", {}),
                **_a_drain(receiver, flood_started),
                **_b_latency(stack, receiver, b_path, b_rows, flood_started, posted_at, drained_at),
                "b_interval_ms": plan.flood_interval * 1000, "processes": plan.processes,
                "service_overrides": stack.overrides}


def _a_drain(receiver: Receiver, flood_started: float) -> dict[str, Any]:
    arrivals = sorted(call.arrival for call in receiver.timeline("/flood/a/"))
    seconds = arrivals[-1] - flood_started if arrivals else float("nan")
    log(f"   A drained: {len(arrivals):,} arrivals, the last {seconds:.1f} s after the first POST")
    return {"a_arrivals": len(arrivals), "a_drain_seconds": seconds,
            "a_rate": len(arrivals) / seconds if arrivals and seconds > 0 else float("nan")}


def _b_latency(stack: ServiceStack, receiver: Receiver, path: str, rows: list[dict[str, Any]], flood_started: float,
               posted_at: float, drained_at: float) -> dict[str, Any]:
    """B's POST start → first arrival, for its events posted while A drained and before A began; those posted while
    A drained also split at the moment A's last batch was accepted: ``b_posting`` (A's batches and deliveries share
    the machine) and ``b_after_posting`` (only A's deliveries)."""
    first = receiver.first_arrivals(path)
    figures: dict[str, Any] = {"b_statuses": dict(Counter(str(row["status"]) for row in rows))}
    for name, lo, hi in (("during", flood_started, drained_at), ("quiet", 0.0, flood_started),
                         ("posting", flood_started, posted_at), ("after_posting", posted_at, drained_at)):
        sent = [row for row in rows if lo <= row["start"] < hi and row["status"] == 202 and row["id"]]
        figures[f"b_{name}"] = {"sent": len(sent), **stack.latencies(sent, first)}
    during = figures["b_during"]
    log(f"   B while A drained: {during['delivered']}/{during['sent']} delivered, p50 {during['p50_ms']:.0f} ms, "
        f"p99 {during['p99_ms']:.0f} ms (of which the POST until its 202: p99 {during['post_p99_ms']:.0f} ms; "
        f"quiet: p99 {figures['b_quiet']['p99_ms']:.0f} ms; while A posted: p99 {figures['b_posting']['p99_ms']:.0f} ms, "
        f"after: p99 {figures['b_after_posting']['p99_ms']:.0f} ms); "
        + ", ".join(f"{name} p50 {v['p50_ms']:.0f} / p99 {v['p99_ms']:.0f} ms" for name, v in during["stages"].items()))
    return figures


def _section(step: dict[str, Any], r: dict[str, Any], add: Add) -> None:
    how = f"in batches of {step.get('batch_size', 200)} (`POST /v1/events/batch`)" if step["batch"] else "one event a request (`POST /v1/events`)"
    statuses = ", ".join(f"{k}: {v:,}" for k, v in sorted(step["a_post_statuses"].items())) or "–"
    subscribed = (f"each subscribed to all of them, so {step['events'] * step['endpoints']:,} deliveries"
                  if step.get("fanout") else
                  f"each subscribed to an event type of its own, so {step['events'] // step['endpoints']:,} each")
    add(f"Tenant A posts {step['events']:,} events at once for its {step['endpoints']} endpoints ({subscribed}), "
        f"{how}, 2 load processes × 32 "
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


section = section_of("flood", "Tenant flood")(_section)
fanout_section = section_of("flood_fanout", "Tenant flood, each event to all ten endpoints")(_section)

STEP = Step("flood", "tenant flood", flood, lambda context: 1200 * context.budget, (section,))
FANOUT = Step("flood_fanout", "tenant flood, each event to all ten endpoints",
              lambda context, deadline: flood(context, deadline, fanout=True),
              lambda context: 1800 * context.budget, (fanout_section,))
