"""Chaos run: real processes on a RabbitMQ node of its own and PostgreSQL, faults injected while events flow
(``python bench/run.py chaos --help``; what it does and checks: ``docs/reliability.md``). Exit status 1 if a
check fails.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import pika

from bench.kit import drill
from bench.kit.cluster import Cluster
from bench.kit.procs import PROCS, log
from bench.kit.receiver_process import Receiver
from bench.kit.stack import ServiceStack
from webhooks.messaging.brokers import connect

#: The poison message: not JSON, so no worker can take it for a delivery.
POISON_BODY = b"\x00chaos: not a delivery message"


def inject_poison(stack: ServiceStack) -> None:
    connection = connect(stack.env["AMQP_URL"], 5)
    connection.channel().basic_publish("", f"{stack.prefix}.deliver", POISON_BODY, pika.BasicProperties(delivery_mode=2))
    connection.close()


def restart_postgres() -> None:
    cluster = sorted(os.listdir("/etc/postgresql"))[-1]
    subprocess.run(["pg_ctlcluster", "--skip-systemctl-redirect", cluster, "main", "restart"], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)


def kill_a_worker(stack: ServiceStack) -> None:
    """SIGKILL one delivery worker at random and start another in its place."""
    victim = stack.workers.pop(random.randrange(len(stack.workers)))
    PROCS.stop(victim, grace=5.0, sig=signal.SIGKILL)
    log(f"SIGKILL {victim.name}; restarting it")
    stack.start_workers(1, clock=False)


def faults(stack: ServiceStack, cluster: Cluster, duration: float, stop: threading.Event, pg_restart: bool) -> None:
    """The fault schedule, spread over the load's ``duration``."""
    node = cluster.nodes[0]
    plan: list[tuple[float, str, Callable[[], Any]]] = [
        (0.15, "poison", lambda: inject_poison(stack)),
        (0.25, "broker down", lambda: cluster.ctl(node, "stop_app")),
        (0.45, "broker up", lambda: cluster.ctl(node, "start_app")),
    ]
    if pg_restart:
        plan.append((0.65, "postgres restart", restart_postgres))
    start = time.monotonic()
    next_kill = start + 3
    while not stop.is_set():
        elapsed = (time.monotonic() - start) / duration
        while plan and plan[0][0] <= elapsed:
            _, name, action = plan.pop(0)
            log(name)
            action()
        if time.monotonic() >= next_kill and elapsed < 1.0:
            kill_a_worker(stack)
            next_kill = time.monotonic() + random.uniform(3, 6)
        time.sleep(0.1)
    for _, name, action in plan:  # whatever the load finished too early for
        log(name)
        action()


def dead_letters(stack: ServiceStack) -> int:
    """How many copies of the poison message the dead-letter queue holds (they are left in it)."""
    connection = connect(stack.env["AMQP_URL"], 5)
    channel = connection.channel()
    count = 0
    while (got := channel.basic_get(f"{stack.prefix}.dead"))[0] is not None:
        count += got[2] == POISON_BODY
    connection.close()  # the unacknowledged messages go back to the queue
    return count


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--quick", action="store_true", help="CI size: 600 events at 40/s, no PostgreSQL restart")
    parser.add_argument("--settle", type=float, default=180.0, help="seconds to wait for deliveries after the load")


def main(args: argparse.Namespace) -> int:
    if args.quick:
        args.events, args.rate = 600, 40.0
    cluster = drill.own_broker("chaos", nodes=1)
    started = time.monotonic()
    booting = ThreadPoolExecutor(1).submit(cluster.start)  # the node boots while the database is migrated
    receiver = Receiver("chaos-receiver").start()
    stack = drill.service("chaos", cluster, {"RETRY_LADDER": "1s,2s,5s,10s,30s"})
    stack.release(queues=False)
    booting.result()
    log(f"RabbitMQ node and database ready in {time.monotonic() - started:.0f} s: {cluster.amqp_url}")
    stack.release(database=False)
    drill.start(stack)
    tenant = stack.tenant("chaos")
    stack.endpoint(tenant, receiver.url("/hook"))
    duration = args.events / args.rate
    log(f"sending {args.events} events at {args.rate:g}/s for {duration:.0f}s")
    stop = threading.Event()
    chaos = threading.Thread(target=faults, args=(stack, cluster, duration, stop, not args.quick), daemon=True)
    chaos.start()
    sent = stack.paced(tenant, args.events, args.rate, timeout=duration + 600, idempotency_prefix=f"chaos-{os.getpid()}")
    stop.set()
    chaos.join()
    accepted = {row["id"] for row in sent if row["status"] == 202}
    drill.settle(args.settle, lambda: accepted <= {webhook_id for _, webhook_id, _ in receiver.dump()}
                 and drill.unfinished_deliveries(stack.sql) == 0)
    results = {
        **drill.arrivals(accepted, [webhook_id for _, webhook_id, _ in receiver.dump()]),
        "attempt log missing": drill.missing_attempt_logs(stack.sql),
        "poison in DLQ": dead_letters(stack),
        "refused then retried (non-202)": sum(len(row.get("refusals", [])) for row in sent),
        **{f"status {k}": v for k, v in stack.status_counts().items()},
    }
    drill.heading("chaos")
    for name, value in results.items():
        print(f"{name}: {value:.4f}" if isinstance(value, float) else f"{name}: {value}")
    checks = {
        "every accepted event delivered": results["lost"] == 0 and results["accepted"] > 0,
        "every delivery has its attempt log": results["attempt log missing"] == 0,
        "poison message dead-lettered once": results["poison in DLQ"] == 1,
    }
    return drill.verdict("chaos", checks)
