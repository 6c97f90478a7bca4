"""Step ``service``: this service end to end with its default settings, the way the Procfile runs it: ingestion,
then delivery (every attempt claimed, signed and logged in PostgreSQL); latency at a fixed rate; 1 and 4 workers."""

from __future__ import annotations

import os
import time
from collections import Counter
from typing import Any

from bench.kit.cpu_split import CpuSampler, describe, steady_split
from bench.kit.markdown import Add, mib, n, ok, section_of, why
from bench.kit.plan import Plan
from bench.kit.procs import Deadline, RssSampler, ScenarioTimeout, log
from bench.kit.receiver_process import Receiver
from bench.kit.stack import ServiceStack, running
from bench.kit.stats import WARMUP, steady_rate
from bench.kit.step import Context, Results, Step, guarded


def _service_delivery(stack: ServiceStack, receiver: Receiver, plan: Plan, name: str, processes: int,
                      deadline: Deadline) -> dict[str, Any]:
    """Ingest ``plan.events`` through gunicorn with the workers stopped, then deliver them."""
    tenant = stack.tenant(name)
    path = f"/svc/{name}"
    endpoint = stack.endpoint(tenant, receiver.url(path))
    # Every event's message is in the queue before the workers start.
    ingest = stack.preload(tenant, plan.events, 1, deadline)
    events = ingest["events"]
    log(f"   ingested {events} events at {ingest['rate']:,.0f}/s (server side; wrk non-2xx: {ingest['client_non_2xx']})")
    with CpuSampler() as cpu:
        run = stack.deliver(receiver, path, events, processes, deadline.left(), deadline, every=0.1, rss_every=0.5)
    times = [row[0] for row in receiver.dump(path)]
    rate, span = steady_rate(times, WARMUP)
    split = steady_split(cpu.samples, times, os.cpu_count() or 1)
    if split:
        log(f"   {describe(split)}")
    attempts = stack.sql.value("SELECT count(*) FROM attempt WHERE endpoint_id = %s", (endpoint,))
    delivered = stack.sql.value("SELECT count(*) FROM delivery WHERE endpoint_id = %s AND status = 'delivered'",
                                (endpoint,))
    log(f"   service ({processes} worker processes): {rate:,.0f} deliveries/s sustained, {attempts} attempts logged")
    return {"processes": processes, "events": events, "arrivals": len(times),
            "rate": rate, "steady_seconds": span, "from_start_seconds": max(times) - run.started,
            "attempts_logged": attempts, "delivered": delivered, "memory": run.rss.summary(), "ingest": ingest,
            "cpu": split}


def _service_latency(stack: ServiceStack, receiver: Receiver, plan: Plan, deadline: Deadline) -> dict[str, Any]:
    """Events at a fixed rate with the workers running: POST start to arrival at the receiver."""
    tenant = stack.tenant("latency")
    path = "/svc/latency"
    stack.endpoint(tenant, receiver.url(path))
    workers = stack.start_workers(plan.processes)
    time.sleep(2.0)  # workers connected and consuming
    count = int(plan.latency_rate * plan.latency_seconds)
    try:
        with RssSampler(workers, 0.5) as rss:
            sent = stack.paced(tenant, count, plan.latency_rate, timeout=plan.latency_seconds + 60)
            accepted = [row for row in sent if row["status"] == 202 and row["id"]]
            try:
                receiver.wait_for(path, len(accepted), Deadline(min(60.0, deadline.left()), "latency deliveries"),
                                  also=stack.check_alive)
            except ScenarioTimeout:
                pass  # report what arrived
    finally:
        stack.stop_workers()
    rows = sorted(accepted, key=lambda row: row["start"])
    measured = rows[int(len(rows) * WARMUP):]
    span = rows[-1]["start"] - rows[0]["start"] if len(rows) > 1 else 0.0
    statuses = dict(Counter(str(row["status"]) for row in sent))
    result = {"rate": plan.latency_rate, "sent": count, "accepted": len(accepted), "statuses": statuses,
              "achieved_rate": (len(rows) - 1) / span if span else 0.0, "measured": len(measured),
              **stack.latencies(measured, receiver.first_arrivals(path)), "memory": rss.summary()}
    log(f"   latency at {plan.latency_rate:.0f}/s: p50 {result['p50_ms']:.1f} ms, p99 {result['p99_ms']:.1f} ms; "
        + ", ".join(f"{name} p50 {v['p50_ms']:.1f} / p99 {v['p99_ms']:.1f} ms" for name, v in result["stages"].items()))
    return result


def service(context: Context, deadline: Deadline) -> Results:
    """Ingestion, then delivery with one worker process per core; latency at a fixed rate; 1 and 4 workers."""
    receiver, plan = context.receiver, context.plan
    with running("service") as stack:
        results: dict[str, Any] = {"prefix": stack.prefix, "service_overrides": stack.overrides}
        results["throughput"] = guarded(
            "service: ingestion, then delivery with one worker process per core",
            lambda d: _service_delivery(stack, receiver, plan, "throughput", plan.processes, d),
            min(deadline.left(), 120 + plan.events / 50))
        results["latency"] = guarded("service: latency at a fixed rate",
                                     lambda d: _service_latency(stack, receiver, plan, d),
                                     min(deadline.left(), plan.latency_seconds + 150))
        results["scale"] = {}  # keyed by the count as a string, as results.json keeps it
        for processes in (1, 4):
            results["scale"][str(processes)] = guarded(
                f"service: delivery with {processes} worker processes",
                lambda d, p=processes: _service_delivery(stack, receiver, plan, f"scale{p}", p, d),
                min(deadline.left(), 120 + plan.events / 25))
        return results


@section_of("service", "This service")
def service_section(svc: dict[str, Any], r: dict[str, Any], add: Add) -> None:
    add("| figure | value |")
    add("|---|---|")
    step = svc.get("throughput")
    if ok(step):
        ing = step["ingest"]
        add(f"| ingestion through gunicorn (`-w 2`), workers stopped, `POST /v1/events` with ~1 KB payloads | "
            f"**{n(ing['rate'])} events/s** (server side, from `event.created_at`; {ing['events']:,} events; wrk "
            f"{ing['client_threads']} threads × {ing['client_connections']} connections, client p50 "
            f"{n(ing['client_p50_ms'], 1)} ms, p99 {n(ing['client_p99_ms'], 1)} ms, non-2xx {ing['client_non_2xx']}) |")
        add(f"| events → attempts logged (`SELECT count(*) FROM attempt`) → delivered | {step['events']:,} → "
            f"{step['attempts_logged']:,} → {step['delivered']:,} |")
        add(f"| worker RSS during delivery, largest process, sampled every 0.5 s | peak {mib(step['memory'])}, at the "
            f"end {mib(step['memory'], 'end_mib')} |")
    else:
        add(f"| ingestion and delivery | {why(step)} |")
    lat = svc.get("latency")
    if ok(lat):
        add(f"| latency `POST /v1/events` start → arrival at the receiver, {lat['rate']:.0f} events/s for "
            f"{lat['sent'] / lat['rate']:.0f} s (achieved {n(lat['achieved_rate'], 1)}/s), first 10% dropped | "
            f"p50 **{n(lat['p50_ms'], 1)} ms**, p90 {n(lat['p90_ms'], 1)} ms, p99 **{n(lat['p99_ms'], 1)} ms**, max "
            f"{n(lat['max_ms'], 1)} ms ({lat['delivered']:,} of {lat['measured']:,} delivered; of which the POST until its "
            f"202: p50 {n(lat['post_p50_ms'], 1)} ms, p99 {n(lat['post_p99_ms'], 1)} ms; from the 202 to the arrival: "
            f"p50 {n(lat.get('after_answer_p50_ms'), 1)} ms, p99 {n(lat.get('after_answer_p99_ms'), 1)} ms) |")
        for name, stage in lat.get("stages", {}).items():
            add(f"| latency at {lat['rate']:.0f} events/s, stage {name} (from the service's own timestamps) | "
                f"p50 {n(stage['p50_ms'], 1)} ms, p99 {n(stage['p99_ms'], 1)} ms |")
        add(f"| worker peak RSS during the latency run | {mib(lat['memory'])} |")
    else:
        add(f"| latency | {why(lat)} |")
    add("")


def scale_section(r: dict[str, Any], add: Add) -> None:
    add("### Scale: worker processes on 2 cores (8 threads each)")
    add("")
    add("| worker processes | this service, deliveries/s | floor, deliveries/s |")
    add("|---|---|---|")
    svc = r.get("service") or {}
    peers = r.get("peers") or {}
    for processes in (1, 2, 4):
        if processes == 2:
            s, f = svc.get("throughput"), peers.get("floor")
        else:
            s = (svc.get("scale") or {}).get(str(processes))
            f = (peers.get("floor-scale") or {}).get(str(processes))
        s_text = n(s["rate"]) if ok(s) and ok(svc) else why(s)
        f_text = n(f["rate"]) if ok(f) else why(f)
        add(f"| {processes} | {s_text} | {f_text} |")
    add("")
    add("2 processes is the throughput run above. With 4 processes the service's in-flight cap is 32.")
    add("")


STEP = Step("service", "this service", service, lambda context: 1200 * context.budget,
            (service_section, scale_section))
