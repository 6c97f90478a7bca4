"""Step ``peers``: the floors (``bench/peers/``), dramatiq and Celery deliver the same pre-loaded messages to the
same receiver, each with ``os.cpu_count()`` worker processes and queues of its own; and the report's throughput
table, which puts this service's rate (step ``service``) beside theirs."""

from __future__ import annotations

import os
import time
from typing import Any

from bench.kit import cpu_split
from bench.kit.cpu_split import CpuSampler, describe, steady_split
from bench.kit.markdown import Add, mib, n, ok, service_settings_note, why
from bench.kit.procs import CLEANUP, PROCS, PYTHON, VENV_BIN, Child, Deadline, RssSampler, check_alive, log
from bench.kit.receiver_process import Receiver
from bench.kit.services import AMQP_URL, amqp_connection, delete_broker_objects, queue_depth
from bench.kit.stats import WARMUP, steady_rate
from bench.kit.step import Context, Results, Step, guarded

#: Threads per worker process of the thread-pool contenders (floor, dramatiq, Celery).
THREADS = 8

#: Messages in flight per process of the async floor (its prefetch; the calls it holds at once).
ASYNC_PREFETCH = 256


def _peer_workers(kind: str, queue: str, url: str, processes: int) -> list[Child]:
    env = {"BENCH_QUEUE": queue, "BENCH_AMQP_URL": AMQP_URL}
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


def peer_throughput(kind: str, receiver: Receiver, events: int, processes: int, deadline: Deadline) -> dict[str, Any]:
    """Pre-load ``events`` messages, start the workers, time the arrivals at the receiver."""
    tag = f"{kind.replace('-', '_')}_p{processes}"
    queue = f"bench_{tag}_{os.getpid()}"
    path = f"/peer/{tag}"
    url = receiver.url(path)
    extra = [f"{queue}.DQ", f"{queue}.XQ"] if kind == "dramatiq" else []
    CLEANUP.add(f"delete queue {queue}", lambda: delete_broker_objects(queue + ".", [queue, *extra], [queue]))
    if "floor" in kind:  # the floors' queue is declared here: quorum with the service's own arguments, or classic
        from webhooks.messaging.topology import DELIVERY_LIMIT, QUORUM

        with amqp_connection() as connection:
            connection.channel().queue_declare(queue, durable=True, arguments={} if kind == "floor-classic" else
                                               {**QUORUM, "x-delivery-limit": DELIVERY_LIMIT})
    out = PROCS.start(f"{tag}-preload", [PYTHON, "-m", "bench.peers.preload", "floor" if "floor" in kind else kind,
                                         "--queue", queue, "--url", url, "--count", str(events)],
                      {"BENCH_QUEUE": queue, "BENCH_AMQP_URL": AMQP_URL})
    out.popen.wait(max(1.0, deadline.left()))
    if out.popen.returncode != 0:
        raise RuntimeError(f"pre-loading {kind} failed:\n{out.tail()}")
    deadline.wait(lambda: queue_depth(queue) >= events)
    workers = _peer_workers(kind, queue, url, processes)
    started = time.time()
    try:
        with RssSampler(workers, 0.5) as rss, CpuSampler() as cpu:
            receiver.wait_for(path, events, deadline, also=lambda: check_alive(workers))
    finally:
        PROCS.stop_many(workers, grace=10.0)
    times = [row[0] for row in receiver.dump(path)]
    rate, span = steady_rate(times, WARMUP)
    delete_broker_objects(queue + ".", [queue, *extra], [queue])
    concurrency = {"prefetch": ASYNC_PREFETCH} if kind == "async-floor" else {"threads": THREADS}
    result = {"contender": kind, "processes": processes, **concurrency, "messages": events,
              "arrivals": len(times), "rate": rate, "steady_seconds": span,
              "from_start_seconds": max(times) - started, "memory": rss.summary(),
              "cpu": steady_split(cpu.samples, times, os.cpu_count() or 1)}
    log(f"   {kind} ({processes} processes): {rate:,.0f} deliveries/s sustained")
    if result["cpu"]:
        log(f"   {describe(result['cpu'])}")
    return result


def peers(context: Context, deadline: Deadline) -> Results:
    """Every contender's throughput, then the floor's with 1 and 4 processes."""
    receiver, plan = context.receiver, context.plan
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


def throughput_section(r: dict[str, Any], add: Add) -> None:
    plan = r["plan"]
    add(f"### Throughput ({plan['events']:,} messages each, {plan['processes']} processes)")
    add("")
    add("| contender | queue | sustained deliveries/s | × floor | worker start → last arrival | peak RSS, largest process |")
    add("|---|---|---|---|---|---|")
    peers = r.get("peers", {})
    floor = peers["floor"]["rate"] if ok(peers.get("floor")) else None
    rows = [
        ("floor", "floor: pika consumer, 8 threads, httpx POST, ack (no DB, no signing)", "quorum, the service's primary-queue arguments"),
        ("floor-classic", "floor, same code", "classic"),
        ("async-floor", "async floor: pika `AsyncioConnection` + one aiohttp `ClientSession`, 256 in flight, POST, ack (no DB)", "quorum, the service's primary-queue arguments"),
        ("dramatiq", f"dramatiq {r['versions']['dramatiq']}: actor, `Retries` exponential backoff", "classic (dramatiq's own declaration)"),
        ("celery", f"Celery {r['versions']['celery']}: task, `autoretry_for` + `retry_backoff`, `acks_late`, no result backend", "classic (Celery's default)"),
    ]
    for key, label, queue in rows:
        step = peers.get(key)
        if ok(step):
            ratio = f"{step['rate'] / floor:.2f}" if floor else "–"
            add(f"| {label} | {queue} | {n(step['rate'])} | {ratio} | {step['from_start_seconds']:.1f} s | "
                f"{mib(step['memory'])} |")
        else:
            add(f"| {label} | {queue} | {why(step)} | | | |")
    step = r.get("service", {}).get("throughput")
    if ok(r.get("service")) and ok(step):
        ratio = f"**{step['rate'] / floor:.2f}**" if floor else "–"
        add(f"| **this service**, end to end: signed, claimed and logged in PostgreSQL | quorum | **{n(step['rate'])}** | "
            f"{ratio} | {step['from_start_seconds']:.1f} s | {mib(step['memory'])} |")
    else:
        add(f"| **this service** | quorum | {why(step if step else r.get('service'))} | | | |")
    add("")
    add(f"The service runs with its default settings ({service_settings_note(r)}), to one endpoint; "
        "its log level is its default (INFO: one line per attempt).")
    add("")
    _cpu_section(r, add)


def _cpu_section(r: dict[str, Any], add: Add) -> None:
    """Where each delivery's CPU went in the throughput steps (``bench/kit/cpu_split.py``)."""
    peers = r.get("peers", {})
    labels = {"floor": "floor", "floor-classic": "floor, classic queue", "async-floor": "async floor",
              "dramatiq": "dramatiq", "celery": "Celery"}
    measured = [(label, peers[key]["cpu"]) for key, label in labels.items() if ok(peers.get(key)) and peers[key].get("cpu")]
    step = r.get("service", {}).get("throughput")
    if ok(r.get("service")) and ok(step) and step.get("cpu"):
        measured.append(("**this service**", step["cpu"]))
    if not measured:
        return
    names = {"worker": "workers", "postgresql": "PostgreSQL", "rabbitmq": "RabbitMQ", "receiver": "receiver"}
    add("CPU per delivery, in milliseconds, by process over the same measured window (every process on the "
        "machine sampled every 0.25 s, `bench/kit/cpu_split.py`). On a saturated machine a contender's rate is the "
        "cores divided by the sum:")
    add("")
    add("| contender | " + " | ".join(names[role] for role in cpu_split.MAIN_ROLES) + " | the rest | all | cores busy |")
    add("|---|" + "---|" * (len(cpu_split.MAIN_ROLES) + 3))
    for label, cpu in measured:
        per = cpu["ms_per_delivery"]
        rest = sum(ms for role, ms in per.items() if role not in cpu_split.MAIN_ROLES)
        add(f"| {label} | " + " | ".join(f"{per.get(role, 0.0):.3f}" for role in cpu_split.MAIN_ROLES)
            + f" | {rest:.3f} | {cpu['total_ms']:.3f} | {cpu['busy_cores']:.2f} of {cpu['cores']} |")
    add("")


STEP = Step("peers", "floor, dramatiq and Celery", peers, lambda context: 900 * context.budget, (throughput_section,))
