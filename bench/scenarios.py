"""The steps of ``bench/run.py``: each returns a dict of figures (or of what went wrong).

Runs inside ``bench/.venv``. Every contender gets the same receiver process, the same
~1 KB payload, the same number of messages, ``os.cpu_count()`` worker processes, and its
own queues (``bench_<contender>_<pid>``). The thread-pool contenders run ``THREADS``
threads per process, the async floor ``ASYNC_PREFETCH`` messages in flight per process;
the service runs with its default settings (exceptions, where a step needs one, are
recorded in its ``service_overrides`` and named in the report).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import sys
import threading
import time
import traceback
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable

from bench import engine_steps, flood, harness, ingest_steps, report, web_steps
from bench.engine_steps import EnginePlan
from bench.harness import (
    CLEANUP,
    PROCS,
    PYTHON,
    VENV_BIN,
    Child,
    Deadline,
    Receiver,
    RssSampler,
    ScenarioTimeout,
    log,
)
from bench.payload import webhook_body
from bench.cpu_split import CpuSampler, describe, steady_split
from bench.stack import ServiceStack, service_defaults
from bench.stats import WARMUP, percentile, steady_rate

#: Threads per worker process of the thread-pool contenders (floor, dramatiq, Celery).
THREADS = 8

#: Messages in flight per process of the async floor (its prefetch; the calls it holds at once).
ASYNC_PREFETCH = 256

#: The ladder step's in-flight cap per endpoint when the service's default is below it: retries
#: that fall due together must not be deferred by the cap, or the step measures the cap, not the ladder.
LADDER_MIN_IN_FLIGHT = 16

#: The backlog drain counts as stalled when nothing is delivered for this long (seconds).
STALL_SECONDS = 60.0


@dataclass(frozen=True)
class Plan:
    """How big each step is (``--quick`` or the full issue)."""

    quick: bool
    events: int
    processes: int
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

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "Plan":
        quick = args.quick
        return cls(
            quick=quick,
            events=args.events or (3000 if quick else 20_000),
            processes=os.cpu_count() or 2,
            latency_rate=200.0,
            latency_seconds=15.0 if quick else 60.0,
            noisy_events=300 if quick else 2000,
            noisy_timeout=5.0,
            ladder="2s,10s,30s",
            ladder_first=150 if quick else 1000,
            ladder_second=150 if quick else 1000,
            ladder_second_seconds=20.0,
            backlog=args.backlog or (5000 if quick else 100_000),
            backlog_timeout=args.backlog_timeout or (420.0 if quick else 7200.0),
            release_rate=args.release_rate,
            receiver_seconds=5 if quick else 10,
        )


# -- running steps -------------------------------------------------------------------------------


def guarded(name: str, step: Callable[[Deadline], dict[str, Any]], seconds: float) -> dict[str, Any]:
    """Run one step under a time limit; an error or timeout is recorded, the run goes on."""
    log(f"== {name} (time limit {seconds:.0f} s)")
    started = time.monotonic()
    try:
        result = step(Deadline(seconds, name))
        result.setdefault("status", "ok")
    except ScenarioTimeout as error:
        log(f"   {name}: timed out: {error}")
        result = {"status": "timeout", "error": str(error)}
    except Exception as error:  # noqa: BLE001 - one broken step must not lose the others
        log(f"   {name}: failed: {error!r}")
        result = {"status": "error", "error": f"{type(error).__name__}: {error}",
                  "traceback": traceback.format_exc()[-3000:]}
    result["wall_seconds"] = round(time.monotonic() - started, 1)
    return result


# -- the receiver --------------------------------------------------------------------------------


def receiver_capacity(receiver: Receiver, plan: Plan, deadline: Deadline) -> dict[str, Any]:
    """What the receiver answers per second under wrk (1 thread, 32 keep-alive connections)."""
    script = harness.lua_post_script(webhook_body(), {"Content-Type": "application/json", "webhook-id": "msg_capacity"})
    result = harness.run_wrk(receiver.url("/capacity"), script, threads=1, connections=32,
                             duration=plan.receiver_seconds)
    receiver.reset()
    log(f"   receiver: {result.rps:,.0f} requests/s (p99 {result.p99_ms} ms)")
    return {"rps": result.rps, "requests": result.requests, "seconds": result.seconds, "p50_ms": result.p50_ms,
            "p99_ms": result.p99_ms, "non_2xx": result.non_2xx, "tool": f"wrk {harness.wrk_version()}",
            "threads": 1, "connections": 32}


# -- floor, dramatiq, Celery ---------------------------------------------------------------------


def _is_floor(kind: str) -> bool:
    """The floors (``floor``, ``floor-classic``, ``async-floor``): queue declared and pre-loaded by the harness."""
    return "floor" in kind


def _declare_floor_queue(queue: str, quorum: bool) -> None:
    from webhooks.messaging.topology import DELIVERY_LIMIT, QUORUM  # the service's own primary-queue arguments

    arguments = {**QUORUM, "x-delivery-limit": DELIVERY_LIMIT} if quorum else {}
    connection = harness.amqp_connection()
    try:
        connection.channel().queue_declare(queue, durable=True, arguments=arguments)
    finally:
        connection.close()


def _peer_workers(kind: str, queue: str, url: str, processes: int) -> list[Child]:
    env = {"BENCH_QUEUE": queue, "BENCH_AMQP_URL": harness.AMQP_URL}
    if kind == "async-floor":
        return [PROCS.start(f"{kind}-{i}", [PYTHON, "-m", "bench.peers.async_floor", "--queue", queue, "--url", url,
                                            "--prefetch", str(ASYNC_PREFETCH)], env) for i in range(processes)]
    if kind.startswith("floor"):
        return [PROCS.start(f"{kind}-{i}", [PYTHON, "-m", "bench.peers.floor", "--queue", queue, "--url", url,
                                            "--threads", str(THREADS)], env) for i in range(processes)]
    if kind == "dramatiq":
        return [PROCS.start("dramatiq", [str(VENV_BIN / "dramatiq"), "bench.peers.dramatiq_app", "--processes",
                                         str(processes), "--threads", str(THREADS), "--queues", queue], env)]
    return [PROCS.start(f"celery-{i}", [str(VENV_BIN / "celery"), "-A", "bench.peers.celery_app", "worker",
                                        "--pool", "threads", "--concurrency", str(THREADS), "-Q", queue,
                                        "-n", f"bench{i}-{os.getpid()}@%h", "--without-gossip", "--without-mingle",
                                        "--without-heartbeat", "--loglevel", "WARNING"], env)
            for i in range(processes)]


def _check_alive(children: list[Child]) -> None:
    for child in children:
        if not child.alive():
            raise RuntimeError(f"{child.name} exited ({child.popen.returncode}):\n{child.tail()}")


def peer_throughput(kind: str, receiver: Receiver, events: int, processes: int, deadline: Deadline) -> dict[str, Any]:
    """Pre-load ``events`` messages, start the workers, time the arrivals at the receiver."""
    tag = f"{kind.replace('-', '_')}_p{processes}"
    queue = f"bench_{tag}_{os.getpid()}"
    path = f"/peer/{tag}"
    url = receiver.url(path)
    extra = [f"{queue}.DQ", f"{queue}.XQ"] if kind == "dramatiq" else []
    CLEANUP.add(f"delete queue {queue}", lambda: harness.delete_broker_objects(queue + ".", [queue, *extra], [queue]))
    if _is_floor(kind):
        _declare_floor_queue(queue, quorum=kind != "floor-classic")
    preload_kind = "floor" if _is_floor(kind) else kind
    out = PROCS.start(f"{tag}-preload", [PYTHON, "-m", "bench.peers.preload", preload_kind, "--queue", queue,
                                         "--url", url, "--count", str(events)],
                      {"BENCH_QUEUE": queue, "BENCH_AMQP_URL": harness.AMQP_URL})
    out.popen.wait(max(1.0, deadline.left()))
    if out.popen.returncode != 0:
        raise RuntimeError(f"pre-loading {kind} failed:\n{out.tail()}")
    while harness.queue_depth(queue) < events:
        deadline.check()
        time.sleep(0.2)
    workers = _peer_workers(kind, queue, url, processes)
    started = time.time()
    try:
        with RssSampler(workers, 0.5) as rss, CpuSampler() as cpu:
            receiver.wait_for(path, events, deadline, also=lambda: _check_alive(workers))
    finally:
        PROCS.stop_many(workers, grace=10.0)
    times = [row[0] for row in receiver.dump(path)]
    rate, span = steady_rate(times, WARMUP)
    harness.delete_broker_objects(queue + ".", [queue, *extra], [queue])
    concurrency = {"prefetch": ASYNC_PREFETCH} if kind == "async-floor" else {"threads": THREADS}
    result = {"contender": kind, "processes": processes, **concurrency, "messages": events,
              "arrivals": len(times), "rate": rate, "steady_seconds": span,
              "from_start_seconds": max(times) - started, "memory": rss.summary(),
              "cpu": steady_split(cpu.samples, times, os.cpu_count() or 1)}
    log(f"   {kind} ({processes} processes): {rate:,.0f} deliveries/s sustained")
    if result["cpu"]:
        log(f"   {describe(result['cpu'])}")
    return result


def peers(receiver: Receiver, plan: Plan, deadline: Deadline) -> dict[str, Any]:
    results: dict[str, Any] = {}
    per_step = deadline.left() / 7
    for kind in ("floor", "floor-classic", "async-floor", "dramatiq", "celery"):
        results[kind] = guarded(f"{kind} throughput",
                                lambda d, k=kind: peer_throughput(k, receiver, plan.events, plan.processes, d),
                                min(per_step, deadline.left()))
    results["floor-scale"] = {}  # keyed by the count as a string, as results.json keeps it
    for processes in (1, 4):
        results["floor-scale"][str(processes)] = guarded(
            f"floor with {processes} processes",
            lambda d, p=processes: peer_throughput("floor", receiver, plan.events, p, d),
            min(per_step, deadline.left()))
    return results


# -- the service ---------------------------------------------------------------------------------


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
    stack.start_clock()
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
    arrival = {}
    for t, webhook_id, _ in receiver.dump(path):
        arrival.setdefault(webhook_id, t)
    rows = sorted(accepted, key=lambda row: row["start"])
    measured = rows[int(len(rows) * WARMUP):]
    latencies = [(arrival[row["id"]] - row["start"]) * 1000 for row in measured if row["id"] in arrival]
    post_ms = [(row["end"] - row["start"]) * 1000 for row in measured]
    after_answer = [(arrival[row["id"]] - row["end"]) * 1000 for row in measured if row["id"] in arrival]
    span = rows[-1]["start"] - rows[0]["start"] if len(rows) > 1 else 0.0
    statuses: dict[str, int] = defaultdict(int)
    for row in sent:
        statuses[str(row["status"])] += 1
    result = {"rate": plan.latency_rate, "sent": count, "accepted": len(accepted), "statuses": dict(statuses),
              "achieved_rate": (len(rows) - 1) / span if span else 0.0, "measured": len(measured),
              "delivered": len(latencies), "missing": len(measured) - len(latencies),
              "p50_ms": percentile(latencies, 50), "p90_ms": percentile(latencies, 90),
              "p99_ms": percentile(latencies, 99), "max_ms": max(latencies) if latencies else float("nan"),
              "post_p50_ms": percentile(post_ms, 50), "post_p99_ms": percentile(post_ms, 99),
              "after_answer_p50_ms": percentile(after_answer, 50), "after_answer_p99_ms": percentile(after_answer, 99),
              "stages": stack.stages(measured, arrival), "memory": rss.summary()}
    log(f"   latency at {plan.latency_rate:.0f}/s: p50 {result['p50_ms']:.1f} ms, p99 {result['p99_ms']:.1f} ms; "
        + ", ".join(f"{name} p50 {v['p50_ms']:.1f} / p99 {v['p99_ms']:.1f} ms" for name, v in result["stages"].items()))
    return result


def service(receiver: Receiver, plan: Plan, deadline: Deadline) -> dict[str, Any]:
    stack = ServiceStack("service")
    try:
        stack.release()
        stack.start_web()
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
    finally:
        stack.close()


# -- noisy neighbour -----------------------------------------------------------------------------


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
    while stack.primary_depth() < events * (10 if with_dead else 9):
        deadline.check()
        time.sleep(0.2)
    stack.start_workers(plan.processes)
    stack.start_clock()
    started = time.time()
    try:
        receiver.wait_for(prefix, expected, deadline, also=stack.check_alive)
    finally:
        stack.stop_workers()
    times = sorted(t for t, _, path in receiver.dump() if path.startswith(prefix))
    rate, _ = steady_rate(times, WARMUP)
    result = {"events": events, "healthy_deliveries": len(times), "rate_from_start": expected / (times[-1] - started),
              "rate_steady": rate, "seconds": times[-1] - started}
    if dead is not None:
        statuses = dict(stack.sql.rows("SELECT status, count(*) FROM delivery WHERE endpoint_id = %s GROUP BY status",
                                       (dead,)))
        result["dead_endpoint"] = {
            "attempts": stack.sql.value("SELECT count(*) FROM attempt WHERE endpoint_id = %s", (dead,)),
            "statuses": statuses,
            "health": stack.sql.value("SELECT health FROM endpoint WHERE id = %s", (dead,)),
        }
    return result


def noisy(receiver: Receiver, plan: Plan, deadline: Deadline) -> dict[str, Any]:
    """9 healthy endpoints, then the same plus one that never answers (``DELIVERY_TIMEOUT=5``)."""
    stack = ServiceStack("noisy", {"DELIVERY_TIMEOUT": str(plan.noisy_timeout)})
    try:
        stack.release()
        stack.start_web()
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
    finally:
        stack.close()


# -- ladder fidelity -----------------------------------------------------------------------------


def ladder(receiver: Receiver, plan: Plan, deadline: Deadline) -> dict[str, Any]:
    """A 3-tier ladder, an endpoint that always fails: fill the long tier, then the short ones."""
    from webhooks.durations import name_ms, parse_ms  # the service's own tier names

    tiers = [name_ms(parse_ms(part)) for part in plan.ladder.split(",")]
    # Offline after N failures would park this always-failing endpoint (the health feature, not the
    # ladder); an in-flight cap below LADDER_MIN_IN_FLIGHT would defer retries that fall due together.
    env = {"RETRY_LADDER": plan.ladder, "OFFLINE_AFTER_FAILURES": "1000000000"}
    if int(service_defaults()["ENDPOINT_MAX_IN_FLIGHT"]) < LADDER_MIN_IN_FLIGHT:
        env["ENDPOINT_MAX_IN_FLIGHT"] = str(LADDER_MIN_IN_FLIGHT)
    stack = ServiceStack("ladder", env)
    try:
        stack.release()
        stack.start_web()
        tenant = stack.tenant("ladder")
        path = "/fail/ladder"
        endpoint = stack.endpoint(tenant, receiver.url(path))
        stack.start_workers(plan.processes)
        stack.start_clock()
        time.sleep(2.0)
        long_queue = f"{stack.prefix}.wait.{tiers[-1]}"
        # 1. The first batch walks down the ladder into the longest tier.
        first = stack.paced(tenant, plan.ladder_first, 100.0, timeout=plan.ladder_first / 100 + 60)
        last_tier_attempt = len(tiers)
        while stack.sql.value("SELECT count(*) FROM delivery WHERE endpoint_id = %s AND attempts >= %s",
                              (endpoint, last_tier_attempt)) < sum(1 for r in first if r["status"] == 202):
            deadline.check()
            stack.check_alive()
            time.sleep(0.5)
        long_depth = harness.queue_depth(long_queue)
        log(f"   {long_depth} messages wait in {long_queue}; now failing a second batch into the short tiers")
        # 2. A second batch, spread out, goes through the short tiers while the long one is full.
        depths: dict[str, int] = {tier: 0 for tier in tiers}
        second_rate = plan.ladder_second / plan.ladder_second_seconds
        sent_second: list[dict[str, Any]] = []
        thread = threading.Thread(target=lambda: sent_second.extend(
            stack.paced(tenant, plan.ladder_second, second_rate, timeout=plan.ladder_second_seconds + 60)))
        thread.start()
        while thread.is_alive():
            for tier in tiers:
                depths[tier] = max(depths[tier], harness.queue_depth(f"{stack.prefix}.wait.{tier}"))
            time.sleep(0.5)
        thread.join()
        accepted = sum(1 for r in [*first, *sent_second] if r["status"] == 202)
        # 3. Every delivery fails its last attempt (attempts = tiers + 1).
        while stack.sql.value("SELECT count(*) FROM delivery WHERE endpoint_id = %s AND status = 'failed'",
                              (endpoint,)) < accepted:
            deadline.check()
            stack.check_alive()
            for tier in tiers:
                depths[tier] = max(depths[tier], harness.queue_depth(f"{stack.prefix}.wait.{tier}"))
            time.sleep(0.5)
        stack.stop_workers()
        return {"service_overrides": stack.overrides,
                "ladder": plan.ladder, "first_batch": len(first), "second_batch": len(sent_second),
                "accepted": accepted, "long_tier_depth_before_second": long_depth, "max_tier_depths": depths,
                **_lateness(stack, receiver, endpoint, path, tiers)}
    finally:
        stack.close()


def _lateness(stack: ServiceStack, receiver: Receiver, endpoint: str, path: str, tiers: list[str]) -> dict[str, Any]:
    """Per tier: arrival (receiver, and ``started_at`` in the database) minus the previous
    attempt's ``next_attempt_at``."""
    attempts: dict[str, dict[int, tuple[float, float | None]]] = defaultdict(dict)
    event_of: dict[str, str] = {}
    for delivery, event, number, started, next_at in stack.sql.rows(
            "SELECT delivery_id, event_id, attempt_no, extract(epoch FROM started_at), "
            "extract(epoch FROM next_attempt_at) FROM attempt WHERE endpoint_id = %s", (endpoint,)):
        attempts[delivery][number] = (float(started), None if next_at is None else float(next_at))
        event_of[delivery] = event
    arrivals: dict[str, list[float]] = defaultdict(list)
    for t, webhook_id, _ in receiver.dump(path):
        arrivals[webhook_id].append(t)
    by_tier: dict[str, dict[str, list[float]]] = {tier: {"receiver": [], "db": []} for tier in tiers}
    for delivery, rows in attempts.items():
        seen = sorted(arrivals.get(event_of[delivery], []))
        for number, (_, next_at) in rows.items():
            if next_at is None or number > len(tiers) or number + 1 not in rows:
                continue
            tier = tiers[number - 1]
            by_tier[tier]["db"].append(rows[number + 1][0] - next_at)
            if len(seen) > number:
                by_tier[tier]["receiver"].append(seen[number] - next_at)
    summary = {}
    for tier, series in by_tier.items():
        rx, dbl = series["receiver"], series["db"]
        summary[tier] = {"retries": len(rx), "min_s": min(rx, default=float("nan")),
                         "p50_s": percentile(rx, 50), "p99_s": percentile(rx, 99), "max_s": max(rx, default=float("nan")),
                         "db_p99_s": percentile(dbl, 99), "db_max_s": max(dbl, default=float("nan")),
                         "within_1s": sum(1 for x in rx if abs(x) <= 1.0)}
        log(f"   tier {tier}: {len(rx)} retries, lateness p50 {summary[tier]['p50_s']:.3f} s, "
            f"p99 {summary[tier]['p99_s']:.3f} s, max {summary[tier]['max_s']:.3f} s")
    return {"tiers": summary}


# -- backlog -------------------------------------------------------------------------------------


def backlog(plan: Plan, deadline: Deadline) -> dict[str, Any]:
    """Deliveries queued for an endpoint that is down; it comes back; time the drain, watch RSS."""
    # A ladder of 2 s steps, long enough for the whole outage: the probe that notices the endpoint
    # is back fires within 2 s, and no delivery runs out of attempts meanwhile.
    steps = max(600, int(plan.backlog_timeout))
    ladder = ",".join(["2s"] * steps)
    stack = ServiceStack("backlog", {"RETRY_LADDER": ladder, "RELEASE_RATE": f"{plan.release_rate:g}"})
    down = Receiver("receiver-backlog")
    result: dict[str, Any] = {"backlog": plan.backlog, "release_rate": plan.release_rate,
                              "ladder": f"2s x {steps}", "timeout": plan.backlog_timeout,
                              "service_overrides": {**stack.overrides, "RETRY_LADDER": f"2s x {steps}"}}
    try:
        stack.release()
        stack.start_web()
        tenant = stack.tenant("backlog")
        path = "/backlog"
        endpoint = stack.endpoint(tenant, down.url(path))  # nothing listens there yet
        workers = stack.start_workers(plan.processes)
        stack.start_clock()
        time.sleep(2.0)
        progress: list[tuple[float, int]] = []
        with RssSampler(workers, 1.0) as rss:
            t_ingest = time.time()
            ingest = stack.ingest(tenant, plan.backlog, Deadline(min(deadline.left(), plan.backlog / 20 + 120),
                                                                 "backlog ingestion"))
            total = ingest["events"]
            result["ingest"] = ingest
            log(f"   {total} events accepted at {ingest['rate']:,.0f}/s while the endpoint is down")
            settle = Deadline(min(deadline.left(), 120 + total / 50), "parking the backlog")
            while True:
                counts = dict(stack.sql.rows(
                    "SELECT status, count(*) FROM delivery WHERE endpoint_id = %s GROUP BY status", (endpoint,)))
                if stack.primary_depth() == 0 and counts.get("pending", 0) <= 1:
                    break
                settle.check()
                stack.check_alive()
                time.sleep(1.0)
            result["before_return"] = counts
            result["parking_seconds"] = time.time() - t_ingest
            rss_parked = len(rss.samples)
            log(f"   endpoint down: {counts}; bringing the receiver back")
            t_back = time.time()
            down.start()
            drain = Deadline(min(deadline.left(), plan.backlog_timeout), "backlog drain")
            delivered, last_change = 0, time.monotonic()
            result["finished"] = False
            try:
                while delivered < total:
                    now_delivered = stack.sql.value(
                        "SELECT count(*) FROM delivery WHERE endpoint_id = %s AND status = 'delivered'", (endpoint,))
                    if now_delivered != delivered:
                        delivered, last_change = now_delivered, time.monotonic()
                    elif time.monotonic() - last_change > STALL_SECONDS:
                        result["stalled"] = True
                        log(f"   no delivery for {STALL_SECONDS:.0f} s: stalled at {delivered}/{total}")
                        break
                    progress.append((time.time() - t_back, delivered))
                    if len(progress) % 30 == 0:
                        log(f"   drained {delivered}/{total} in {progress[-1][0]:.0f} s")
                    drain.check()
                    stack.check_alive()
                    time.sleep(1.0)
                else:
                    result["finished"] = True
            except ScenarioTimeout:
                pass
            result["final_statuses"] = dict(stack.sql.rows(
                "SELECT status, count(*) FROM delivery WHERE endpoint_id = %s GROUP BY status", (endpoint,)))
        arrivals = sorted(t for t, _, _ in down.dump(path))
        unique = len({w for _, w, _ in down.dump(path)})
        rate_total = delivered / (arrivals[-1] - t_back) if arrivals else 0.0
        rate, _ = steady_rate(arrivals, WARMUP)
        largest = rss.largest_process_mib()
        result.update({
            "delivered": delivered, "received": len(arrivals), "received_unique": unique,
            "first_arrival_after_return_s": arrivals[0] - t_back if arrivals else None,
            "drain_seconds": (arrivals[-1] - t_back) if arrivals else None,
            "drain_rate": rate_total, "drain_rate_steady": rate,
            "projected_seconds": total / rate_total if rate_total else None,
            "memory": {"start_mib": largest[0], "peak_mib": max(largest), "end_mib": largest[-1],
                       "at_return_mib": largest[rss_parked - 1] if rss_parked else None,
                       "peak_while_parking_mib": max(largest[:rss_parked]) if rss_parked else None,
                       "peak_while_draining_mib": max(largest[rss_parked:]) if len(largest) > rss_parked else None,
                       "samples": len(largest)},
            "rss_series_mib": [round(x, 1) for x in largest],
            "progress": progress[:: max(1, len(progress) // 50)],
        })
        log(f"   backlog: {delivered}/{total} delivered at {rate_total:,.1f}/s; worker RSS "
            f"{largest[0]:.0f} -> peak {max(largest):.0f} -> {largest[-1]:.0f} MiB")
        return result
    finally:
        down.stop()
        stack.close()


# -- everything ----------------------------------------------------------------------------------


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for step, call in (("rabbitmq", harness.rabbitmq_version), ("postgresql", harness.postgres_version)):
        try:
            found[step] = call()
        except Exception as error:  # noqa: BLE001
            found[step] = f"unknown ({error})"
    for package in ("dramatiq", "celery", "kombu", "amqp", "pika", "httpx", "psutil", "gunicorn", "Flask", "peewee",
                    "psycopg2-binary", "aiohttp", "matplotlib"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "not installed"
    found["wrk"] = harness.wrk_version()
    return found


def machine() -> dict[str, Any]:
    model = "?"
    with open("/proc/cpuinfo") as handle:
        for line in handle:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory_kib = 0
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("MemTotal:"):
                memory_kib = int(line.split()[1])
    distro = ""
    try:
        distro = "Debian " + open("/etc/debian_version").read().strip()
    except OSError:
        pass
    return {"cores": os.cpu_count(), "memory_gib": memory_kib / 2**20, "cpu": model,
            "kernel": platform.release(), "os": distro, "load_at_start": os.getloadavg()}


def run_everything(args: argparse.Namespace) -> int:
    from bench.run import service_requirements_for_bench

    if args.from_json:
        with open(args.from_json) as handle:
            report.write_results(report.render(json.load(handle)))
        log(f"rewrote the generated section of bench/RESULTS.md from {args.from_json}")
        return 0
    harness.install_exit_handlers()
    plan = Plan.from_args(args)
    only = set(args.only.split(",")) if args.only else None
    wanted = lambda step: only is None or step in only  # noqa: E731
    command = os.environ.get("BENCH_COMMAND", "python bench/run.py " + " ".join(sys.argv[1:]))
    started = time.time()
    if harness.ensure_wrk() is None:
        log("wrk is missing and could not be installed (apt-get install wrk): cannot measure the receiver or ingestion")
        return 2
    results: dict[str, Any] = {"command": command, "plan": plan.__dict__, "machine": machine(), "versions": versions(),
                               "date": time.strftime("%Y-%m-%d %H:%M %Z"), "service_defaults": service_defaults(),
                               "overridden_service_pins": service_requirements_for_bench()[1]}
    log(f"benchmark: {command}; {plan.processes} worker processes per contender ({THREADS} threads each for the "
        f"thread-pool ones; the service with its default settings); logs in {PROCS.log_dir}")
    for stale in PROCS.log_dir.glob("*") if PROCS.log_dir.exists() else []:
        if stale.is_file():
            stale.unlink()  # the logs of the previous run
    receiver = Receiver().start()
    budget = 1.0 if plan.quick else 4.0  # scales the time limits
    if wanted("receiver"):
        results["receiver"] = guarded("receiver capacity", lambda d: receiver_capacity(receiver, plan, d), 60)
    if wanted("peers"):
        results["peers"] = peers(receiver, plan, Deadline(900 * budget, "peers"))
    if wanted("service"):
        results["service"] = guarded("this service", lambda d: service(receiver, plan, d), 1200 * budget)
    if wanted("ingest"):
        results["ingest"] = guarded("ingestion", lambda d: ingest_steps.ingest(plan.quick, d), 900 * budget)
    if wanted("slow_clients"):
        results["slow_clients"] = guarded("slow clients", lambda d: web_steps.slow_clients(plan.quick, d), 600 * budget)
    if wanted("admission"):
        results["admission"] = guarded("a tenant's concurrent requests", lambda d: web_steps.admission(plan.quick, d),
                                       900 * budget)
    if wanted("noisy"):
        results["noisy"] = guarded("noisy neighbour", lambda d: noisy(receiver, plan, d), 600 * budget)
    if wanted("ladder"):
        results["ladder"] = guarded("ladder fidelity", lambda d: ladder(receiver, plan, d), 400 * (1 + budget / 4))
    if wanted("backlog"):
        results["backlog"] = guarded("backlog", lambda d: backlog(plan, d),
                                     plan.backlog_timeout + plan.backlog / 20 + 600)
    engine = EnginePlan.from_args(args)
    results["engine_plan"] = engine.__dict__
    for name, title, step, seconds in (
            ("fanout", "50 endpoints answering after 200 ms, one worker process", engine_steps.fanout, 600),
            ("slow", "one endpoint answering after 200 ms", engine_steps.slow, 600),
            ("climb", "an endpoint slowing down above 50 calls in flight", engine_steps.climb, 600),
            ("flood", "tenant flood", flood.flood, 1200),
            ("flood_fanout", "tenant flood, each event to all ten endpoints", flood.flood_fanout, 1800),
            ("inflight", "deliveries in flight to endpoints taking 5 s", engine_steps.inflight, 600)):
        if wanted(name):
            results[name] = guarded(title, lambda d, s=step: s(receiver, engine, d), seconds * budget)
    receiver.stop()
    results["wall_seconds"] = time.time() - started
    PROCS.log_dir.mkdir(exist_ok=True)
    (PROCS.log_dir / "results.json").write_text(json.dumps(results, indent=2, default=str))
    markdown = report.render(results)
    if only is None:
        report.write_results(markdown)
        report.publish_plots(PROCS.log_dir)
        log(f"wrote the generated section of bench/RESULTS.md ({results['wall_seconds'] / 60:.1f} min)")
    else:
        print(markdown)
        log("partial run (--only): bench/RESULTS.md left alone; raw figures in bench/.logs/results.json")
    return 0
