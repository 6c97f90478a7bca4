"""Steps ``slow_clients`` and ``admission``: the web process (the Procfile's gunicorn, default settings, no
delivery worker) under hostile and eager clients (issue 36).

- ``slow_clients``: another client's latency until its ``202`` (``loadgen paced``) while ``SLOW_CONNECTIONS``
  send a request a header line, or a body byte, at a time (``tests/slow_clients.py``), and without them.
- ``admission``: one tenant alone sending as fast as it is answered, a ``429`` sent again after its
  ``Retry-After``. Target: no refusals, and the polite sender gets what an impolite one got before (about 720
  single and 8,300 batched events/s on the machine of issue 36; the polite one got 490 and 5,160 there).
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from typing import Any

from bench.kit.markdown import Add, n, section_of, verdict
from bench.kit.payload import EVENT_TYPE, batch_request, event_request
from bench.kit.procs import Deadline, log
from bench.kit.stack import ServiceStack, Tenant, running
from bench.kit.stats import percentile
from bench.kit.step import Context, Results, Step
from tests.slow_clients import SlowClients

#: Slow connections in each slow phase, and how often each sends its next piece (seconds).
SLOW_CONNECTIONS, SLOW_INTERVAL = 200, 0.5

#: The other client's single events per second, and for how long each phase sends them.
PROBE_RATE, PROBE_SECONDS, QUICK_PROBE_SECONDS = 50.0, 20.0, 6.0

#: Target: the other client's p99 until its 202 with ``SLOW_CONNECTIONS`` slow ones open (ms).
SLOW_P99_TARGET_MS = 100.0

#: The eager senders: connections per load process (2 processes), and events per batch.
POLITE_CONNECTIONS, EAGER_CONNECTIONS, BATCH = 4, 8, 100


def slow_clients(context: Context, deadline: Deadline) -> Results:
    """The other client's latency with no slow connection, 200 sending headers, 200 sending bodies."""
    with running("slow_clients") as stack:
        tenant = stack.tenant("probe")
        seconds = QUICK_PROBE_SECONDS if context.plan.quick else PROBE_SECONDS
        _phase(stack, tenant, None, 2.0)  # warm up: each web process's first requests connect and prepare
        phases = {}
        for kind in (None, "headers", "body"):
            deadline.check()
            phases[kind or "none"] = _phase(stack, tenant, kind, seconds)
        return {"connections": SLOW_CONNECTIONS, "interval_s": SLOW_INTERVAL, "probe_rate": PROBE_RATE,
                "probe_seconds": seconds, "phases": phases}


def _phase(stack: ServiceStack, tenant: Tenant, kind: str | None, seconds: float) -> dict[str, Any]:
    with SlowClients("127.0.0.1", stack.port, SLOW_CONNECTIONS, kind, SLOW_INTERVAL, tenant.api_key) if kind \
            else nullcontext() as slow:
        time.sleep(2 * SLOW_INTERVAL if kind else 0)  # each has sent a few pieces: every one is "in a request"
        sender = stack.start_paced(tenant, int(seconds * PROBE_RATE), PROBE_RATE)
        finished_by = time.monotonic() + seconds + 30  # every request started, and answered or timed out
        while sender.child.alive() and time.monotonic() < finished_by:
            time.sleep(0.2)
        rows = sender.results()
        still_open = slow.open() if kind else 0
    latencies = [(row["end"] - row["start"]) * 1000 for row in rows if row["status"] == 202]
    figures = {"requests": len(rows), "accepted": len(latencies), "p50_ms": percentile(latencies, 50),
               "p99_ms": percentile(latencies, 99), "max_ms": max(latencies, default=float("nan")),
               "slow_still_open": still_open}
    log(f"   {kind or 'no'} slow connections ({seconds:g} s): {figures['accepted']}/{figures['requests']} answered "
        f"202, p50 {figures['p50_ms']:.1f} ms, p99 {figures['p99_ms']:.1f} ms, max {figures['max_ms']:.0f} ms"
        + (f"; {still_open} of {SLOW_CONNECTIONS} slow connections still open" if kind else ""))
    return figures


def admission(context: Context, deadline: Deadline) -> Results:
    """A tenant alone sending as fast as it is answered: polite over 8 connections, and 16 connections."""
    count = 1_500 if context.plan.quick else 6_000
    results: Results = {}
    for name, batch, connections in (("single", 0, POLITE_CONNECTIONS), ("batch", BATCH, POLITE_CONNECTIONS),
                                     ("single_16", 0, EAGER_CONNECTIONS)):
        deadline.check()
        with running(f"admission_{name}", remove=True) as stack:  # INGEST_RATE_LIMIT and the rest: defaults
            tenant = stack.tenant("eager")
            stack.endpoint(tenant, "http://127.0.0.1:9/ep0")
            body = batch_request([EVENT_TYPE] * batch) if batch else event_request()
            stack.burst(tenant.api_key, body, max(300, batch), connections, 2, batch)  # warm up
            run = stack.burst(tenant.api_key, body, count * (10 if batch else 1), connections, 2, batch)
        refused = run["statuses"].get("retried_429", 0)
        results[name] = {"connections": 2 * connections, "batch": batch, "rate": run["rps"], "refused": refused,
                         "statuses": run["statuses"]}
        log(f"   {name}: {2 * connections} connections, {run['rps']:,.0f} events/s, {refused} answers 429")
    return results


@section_of("slow_clients", "Slow clients")
def slow_clients_section(step: dict[str, Any], r: dict[str, Any], add: Add) -> None:
    add(f"gunicorn as the Procfile runs it (2 processes × 8 threads, default settings); another client posts "
        f"single events at {step['probe_rate']:g}/s for {step['probe_seconds']:g} s while {step['connections']} "
        f"connections each send a header line (or a body byte) every {step['interval_s']:g} s.")
    add("")
    add("| slow connections | other client until its 202: p50 / p99 / max | answered | slow ones still open | "
        f"target p99 < {SLOW_P99_TARGET_MS:g} ms |")
    add("|---|---|---|---|---|")
    for kind, label in (("none", "none"), ("headers", f"{step['connections']} sending headers"),
                        ("body", f"{step['connections']} sending a body to `POST /v1/events`")):
        p = step["phases"][kind]
        met = "" if kind == "none" else verdict(p["p99_ms"] < SLOW_P99_TARGET_MS)
        add(f"| {label} | {p['p50_ms']:.1f} / **{p['p99_ms']:.1f}** / {p['max_ms']:.0f} ms | "
            f"{p['accepted']} of {p['requests']} | {p['slow_still_open'] if kind != 'none' else '–'} | {met} |")
    add("")


@section_of("admission", "A tenant's concurrent requests")
def admission_section(step: dict[str, Any], r: dict[str, Any], add: Add) -> None:
    add("One tenant alone, default settings, `bench/kit/loadgen.py burst` (a `429` is sent again after its "
        "`Retry-After`).")
    add("")
    add("| sender | events/s | answers 429 |")
    add("|---|---|---|")
    for key, label in (("single", "single events"), ("batch", f"batches of {BATCH}"), ("single_16", "single events")):
        s = step[key]
        add(f"| {s['connections']} connections, {label} | **{n(s['rate'])}** | {s['refused']} |")
    add("")


SLOW_CLIENTS = Step("slow_clients", "slow clients", slow_clients, lambda context: 300 * context.budget,
                    (slow_clients_section,))
ADMISSION = Step("admission", "a tenant's concurrent requests", admission, lambda context: 300 * context.budget,
                 (admission_section,))
