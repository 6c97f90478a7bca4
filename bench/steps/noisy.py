"""Step ``noisy``: a tenant's 9 healthy endpoints, alone and beside one that never answers (each event
goes to every endpoint): the healthy ones' throughput must hold."""

from __future__ import annotations

import time
from typing import Any

from bench.kit.markdown import Add, n, section_of, service_settings_note
from bench.kit.plan import Plan
from bench.kit.procs import Deadline, log
from bench.kit.receiver_process import Receiver
from bench.kit.stack import ServiceStack, running
from bench.kit.stats import WARMUP, steady_rate
from bench.kit.step import Context, Results, Step, guarded


def _noisy_run(stack: ServiceStack, receiver: Receiver, plan: Plan, name: str, with_dead: bool,
               deadline: Deadline) -> dict[str, Any]:
    tenant = stack.tenant(name)
    prefix = f"/noisy/{name}/"
    for i in range(9):
        stack.endpoint(tenant, receiver.url(f"{prefix}h{i}"))
    dead = stack.endpoint(tenant, receiver.url(f"/hang/{name}")) if with_dead else None
    ingest = stack.ingest(tenant, plan.noisy_events, deadline)
    events = ingest["events"]
    expected = 9 * events
    deadline.wait(lambda: stack.queued() >= events * (10 if with_dead else 9))
    stack.start_workers(plan.processes)
    started = time.time()
    try:
        receiver.wait_for(prefix, expected, deadline, also=stack.check_alive)
    finally:
        stack.stop_workers()
    times = sorted(call.arrival for call in receiver.timeline(prefix))
    rate, _ = steady_rate(times, WARMUP)
    result = {"events": events, "healthy_deliveries": len(times), "rate_from_start": expected / (times[-1] - started),
              "rate_steady": rate, "seconds": times[-1] - started}
    if dead is not None:
        result["dead_endpoint"] = {
            "attempts": stack.sql.value("SELECT count(*) FROM attempt WHERE endpoint_id = %s", (dead,)),
            "statuses": stack.status_counts(dead),
            "health": stack.sql.value("SELECT health FROM endpoint WHERE id = %s", (dead,)),
        }
    return result


def noisy(context: Context, deadline: Deadline) -> Results:
    """9 healthy endpoints, then the same plus one that never answers (``DELIVERY_TIMEOUT=5``)."""
    receiver, plan = context.receiver, context.plan
    with running("noisy", {"DELIVERY_TIMEOUT": str(plan.noisy_timeout)}) as stack:
        alone = guarded("noisy neighbour: 9 healthy endpoints",
                        lambda d: _noisy_run(stack, receiver, plan, "alone", False, d), deadline.left() / 2)
        with_dead = guarded("noisy neighbour: 9 healthy + 1 that always times out",
                            lambda d: _noisy_run(stack, receiver, plan, "withdead", True, d), deadline.left())
        result = {"alone": alone, "with_dead": with_dead, "delivery_timeout": plan.noisy_timeout,
                  "service_overrides": stack.overrides}
        if alone.get("status") == "ok" and with_dead.get("status") == "ok":
            result["ratio_from_start"] = with_dead["rate_from_start"] / alone["rate_from_start"]
            result["ratio_steady"] = with_dead["rate_steady"] / alone["rate_steady"]
            log(f"   healthy throughput with a dead neighbour: {result['ratio_from_start']:.0%} of alone")
        return result


@section_of("noisy", "Noisy neighbour", "alone", "with_dead")
def section(step: dict[str, Any], r: dict[str, Any], add: Add) -> None:
    alone, dead = step["alone"], step["with_dead"]
    add(f"{alone['events']:,} events to a tenant with 9 healthy endpoints, then {dead['events']:,} to one with the "
        f"same 9 plus one that accepts the connection and never answers (`DELIVERY_TIMEOUT={step['delivery_timeout']:g}`); "
        f"the service's defaults otherwise ({service_settings_note(r, step)}; offline after 5 consecutive "
        f"failures); {r['plan']['processes']} worker processes; events pre-loaded, workers started, healthy arrivals "
        "timed.")
    add("")
    add("| | healthy deliveries | worker start → last healthy arrival | healthy deliveries/s (from start) | sustained (after 10%) |")
    add("|---|---|---|---|---|")
    add(f"| 9 healthy | {alone['healthy_deliveries']:,} | {alone['seconds']:.1f} s | {n(alone['rate_from_start'])} | {n(alone['rate_steady'])} |")
    add(f"| 9 healthy + 1 timing out | {dead['healthy_deliveries']:,} | {dead['seconds']:.1f} s | {n(dead['rate_from_start'])} | {n(dead['rate_steady'])} |")
    add(f"| with / without | | | **{step['ratio_from_start']:.0%}** | {step['ratio_steady']:.0%} |")
    info = dead.get("dead_endpoint", {})
    add("")
    add(f"The endpoint that times out: {info.get('attempts')} attempts, then `{info.get('health')}`; its deliveries: "
        f"{', '.join(f'{k} {v}' for k, v in sorted(info.get('statuses', {}).items()))}.")
    add("")


STEP = Step("noisy", "noisy neighbour", noisy, lambda context: 600 * context.budget, (section,))
