"""Step ``ingest``: single events and batches of 100 through gunicorn (2 workers, as the Procfile runs it), no
delivery worker, each half on a fresh stack. Figures: events answered 202 per second and the CPU each part of the
stack spent per event, while their deliveries are published in the background on the same cores (how long after
the last answer all were: beside them). Afterwards every accepted event must have its deliveries, all published,
and no ``seq`` may be missing.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from bench.kit.cpu_split import TICKS, process_cpu_seconds
from bench.kit.markdown import Add, heading, n, verdict
from bench.kit.payload import EVENT_TYPE, batch_request, event_request
from bench.kit.procs import Deadline, log
from bench.kit.stack import ServiceStack, running
from bench.kit.step import Context, Results, Step

#: Events per request of the batch half (the issue's target is stated for batches of 100).
BATCH = 100

#: Keep-alive connections per load process (2 processes): 4 in all, as in every run since the
#: step began (more were refused then; now they wait their turn: step ``admission`` sends over 8 and 16).
CONNECTIONS = 2

#: Targets (events/s on this machine, 2 cores).
SINGLE_TARGET = 1_500
BATCH_TARGET = 20_000

#: ``INGEST_RATE_LIMIT`` of the stacks: high, so that it never refuses.
RATE_LIMIT = 1_000_000.0


def _half(batch: int, count: int, repeat: int, deadline: Deadline) -> dict[str, Any]:
    with running(f"ingest{batch}", {"INGEST_RATE_LIMIT": str(RATE_LIMIT)}, remove=True) as stack:
        tenant = stack.tenant("bench0")
        stack.endpoint(tenant, "http://127.0.0.1:9/ep0")
        deadline.check()
        result = measure(stack, tenant.api_key, count=count, batch=batch, repeat=repeat)
        result["check"] = stack.ingestion_check()
        return result


def ingest(context: Context, deadline: Deadline) -> Results:
    """Single events, then batches of ``BATCH``; each half on a fresh stack."""
    quick = context.plan.quick
    repeat = 1 if quick else 3
    results: Results = {}
    for key, batch in (("single", 0), ("batch", BATCH)):
        count = (20_000 if quick else 100_000) if batch else (2_000 if quick else 10_000)
        results[key] = _half(batch, count, repeat, deadline)
        what = f"batches of {batch}" if batch else "single events"
        log(f"   {what}: {results[key]['rate_median']:,.0f} events/s (median of {repeat})")
    return results


def machine_busy_seconds() -> float:
    """CPU seconds spent by everything on the machine (all cores), from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    return (sum(values[:8]) - idle) / TICKS


def cpu_seconds(stack: ServiceStack) -> dict[str, float]:
    """CPU seconds so far of each part of the stack, of the load generator and of the whole machine."""
    groups = {
        "gunicorn workers": stack.web_worker_pids(),
        "postgres backends": stack.backend_pids(),
        "rabbitmq": [int(p) for p in subprocess.run(["pgrep", "-u", "rabbitmq", "beam.smp"], capture_output=True,
                                                    text=True).stdout.split()],
    }
    out = {name: sum(process_cpu_seconds(pid) for pid in pids) for name, pids in groups.items()}
    out["(gunicorn system part)"] = sum(process_cpu_seconds(pid, True) for pid in groups["gunicorn workers"])
    out["load generator"] = os.times().children_user + os.times().children_system
    out["whole machine"] = machine_busy_seconds()
    return out


def measure(stack: ServiceStack, key: str, *, count: int, batch: int, repeat: int) -> dict[str, Any]:
    """Warm up, then ``repeat`` runs of ``count`` events; events/s, CPU ms per event by part, publish lag."""
    connections, processes = CONNECTIONS, 2
    body = batch_request([EVENT_TYPE] * batch) if batch else event_request()
    stack.burst(key, body, max(300, batch), connections, processes, batch)
    stack.wait_published()
    runs = []
    for run in range(repeat):
        before = cpu_seconds(stack)
        result = stack.burst(key, body, count, connections, processes, batch)
        lag = stack.wait_published()
        after = cpu_seconds(stack)
        cpu = {name: round(1000 * (after[name] - before[name]) / result["count"], 3) for name in after}
        runs.append({"events": result["count"], "seconds": result["seconds"], "rate": result["rps"],
                     "statuses": result["statuses"], "cpu_ms_per_event": cpu, "published_after_s": lag})
        log(f"   run {run + 1}: {result['count']} events in {result['seconds']:.2f} s = {result['rps']:.0f} events/s "
            f"statuses {result['statuses']}; all published {lag if lag is None else round(lag, 2)} s after the last "
            "answer")
        log("     CPU ms per event (publishing included): "
            + ", ".join(f"{name} {value:.3f}" for name, value in cpu.items()))
    rates = sorted(r["rate"] for r in runs)
    return {"batch": batch, "endpoints": 1, "runs": runs, "rate_median": rates[len(rates) // 2],
            "rate_min": rates[0], "rate_max": rates[-1], "connections": connections, "processes": processes}


def section(r: dict[str, Any], add: Add) -> None:
    step = r.get("ingest")
    if step is None or not heading(add, "Ingestion: single events and batches (`bench/steps/ingest.py`)", step):
        return
    add("gunicorn as the Procfile runs it (`-c python:webhooks.gunicorn_conf`, 2 workers), no delivery worker; "
        f"one tenant, one endpoint, ~1 KB events; `bench/kit/loadgen.py` 2 processes × {CONNECTIONS} keep-alive connections "
        "(step `admission` sends over 8 and 16). "
        "Rates are events answered `202` per second; each event's delivery is published (with confirms) and "
        "marked in the background on the same cores. CPU is per event, publishing included.")
    add("")
    add("| requests | events/s (median; min–max) | target | CPU ms per event: gunicorn / PostgreSQL / RabbitMQ / "
        "load generator / whole machine | everything published | checks |")
    add("|---|---|---|---|---|---|---|")
    for key, target in (("single", SINGLE_TARGET), ("batch", BATCH_TARGET)):
        half = step.get(key)
        if half is None:  # a run that measured the other half only
            continue
        label = f"`POST /v1/events/batch`, {half['batch']} events each" if half["batch"] else "`POST /v1/events`"
        cpu = half["runs"][len(half["runs"]) // 2]["cpu_ms_per_event"]
        lags = [run["published_after_s"] for run in half["runs"]]
        check = half["check"]
        add(f"| {label} | **{n(half['rate_median'])}** ({n(half['rate_min'])}–{n(half['rate_max'])}) | "
            f"≥ {n(target)}: {verdict(half['rate_median'] >= target)} | "
            f"{cpu['gunicorn workers']:.2f} / {cpu['postgres backends']:.2f} / {cpu['rabbitmq']:.2f} / "
            f"{cpu['load generator']:.2f} / {cpu['whole machine']:.2f} | "
            f"{', '.join('not within 120 s' if lag is None else f'{lag:.1f} s' for lag in lags)} after the last 202 | "
            f"{check['events']:,} events, {check['deliveries']:,} deliveries, {check['unmarked']} unpublished, "
            f"{check['seq_gaps']} seq gaps |")
    add("")


STEP = Step("ingest", "ingestion", ingest, lambda context: 900 * context.budget, (section,))
