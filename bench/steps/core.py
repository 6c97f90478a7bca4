"""Step ``core`` (only with ``--only core``): one worker process's delivery rate and CPU per attempt, and the
gaps between retries. Events are stored and published in this process through the same code as
``POST /v1/events`` (no HTTP) and delivered to a fast receiver in this process, every attempt logged; then 5
events to an endpoint that fails twice (ladder ``1s,2s``) give the gaps between retries.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.kit.cpu_split import TICKS, process_cpu_seconds
from bench.kit.markdown import Add, section_of
from bench.kit.procs import Deadline
from bench.kit.receiver import FAIL_PREFIX, start as start_receiver
from bench.kit.services import drop_database, free_port, fresh_database, machine_line
from bench.kit.stats import steady_rate
from bench.kit.step import Context, Results, Step
from tests.receivers import Receiver, sequence
from webhooks.cli import create_tenant, migrate
from webhooks.config import Settings
from webhooks.delivery.signing import generate_secret
from webhooks.ingest.accept import accept_event
from webhooks.messaging.brokers import connect
from webhooks.messaging.publisher import Publisher
from webhooks.storage import db
from webhooks.storage.ids import new_id
from webhooks.storage.models import Attempt, Endpoint, Tenant

PAYLOAD = {"order": {"id": "ord_123", "amount": 4200, "currency": "EUR",
                     "lines": [{"sku": f"sku-{i}", "qty": i} for i in range(20)]}}


def core(context: Context, deadline: Deadline) -> Results:
    """Store and publish the events, deliver them with one worker process, then the retry gaps."""
    args = context.args
    events = args.events or 2000
    name = f"bench_{os.getpid()}"
    database_url = f"sqlite:///{tempfile.mkdtemp()}/bench.db" if args.database == "sqlite" else fresh_database(name)
    settings = Settings.from_env(env={}, database_url=database_url, queue_prefix=name, ladder="1s,2s",
                                 allow_private_targets=True)
    connection = connect(settings.amqp_url, 5)
    settings.topology.declare(connection.channel())
    db.init_database(settings.database_url)
    migrate()
    tenant = Tenant.get_by_id(create_tenant("bench")["id"])
    port = free_port()
    counter = start_receiver(port)
    _endpoint(tenant.id, f"http://127.0.0.1:{port}{FAIL_PREFIX.decode() if args.failing else '/'}hook")
    publisher = Publisher(settings.amqp_url)

    started = time.monotonic()
    for _ in range(events):
        accept_event(tenant, "order.created", PAYLOAD, publisher=publisher, topology=settings.topology)
    ingest_rate = events / (time.monotonic() - started)

    env = {**os.environ, "DATABASE_URL": settings.database_url, "QUEUE_PREFIX": settings.queue_prefix,
           "RETRY_LADDER": ",".join(f"{d}ms" for d in settings.ladder.delays_ms), "ALLOW_PRIVATE_TARGETS": "1",
           "LOG_LEVEL": "WARNING"}
    if args.failing:  # an endpoint that always fails would be taken offline and its deliveries parked, not retried
        env["OFFLINE_AFTER_FAILURES"] = "1000000000"
    worker = subprocess.Popen([sys.executable, "-m", "webhooks.worker"], env=env)
    try:
        deadline.wait(lambda: counter.count >= events, 0.05)
        worker_cpu = process_cpu_seconds(worker.pid, children=True)
        threads = _thread_cpu(worker.pid)
        rate, _ = steady_rate(counter.wall)  # after warm-up
        time.sleep(1)
        logged = Attempt.select().count()
        # With --failing the retries of every event still queue ahead: the gaps would measure that queue.
        gaps = [] if args.failing else _retry_gaps(settings, publisher)
    finally:
        worker.send_signal(signal.SIGINT)  # the worker drains
        worker.wait()
        settings.topology.delete(connection.channel())
        connection.close()
        if args.database == "postgresql":
            db.database.obj.close_all()
            drop_database(name)
    return {"machine": machine_line(), "database": args.database, "events": events, "failing": args.failing,
            "prefetch": settings.worker_prefetch, "max_in_flight": settings.endpoint_max_in_flight,
            "ingest_rate": ingest_rate, "rate": rate, "attempts_logged": logged,
            "worker_cpu_ms": 1000 * worker_cpu / events,
            "thread_cpu_ms": {name: 1000 * seconds / events for name, seconds in sorted(threads.items())},
            "retry_gaps": gaps}


def _endpoint(tenant_id: str, url: str) -> None:
    Endpoint.create(id=new_id("ep"), tenant=tenant_id, url=url, secret=generate_secret())


def _thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of each thread of a process, summed by thread name."""
    totals: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        totals[name] = totals.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / TICKS
    return totals


def _retry_gaps(settings: Settings, publisher: Publisher) -> list[list[float]]:
    """Seconds between the attempts of 5 events to an endpoint that fails twice (ladder 1s,2s)."""
    gaps: list[list[float]] = []
    with Receiver(sequence([500, 500, 200])) as failing:
        other = Tenant.get_by_id(create_tenant("gaps")["id"])
        _endpoint(other.id, failing.url)
        for _ in range(5):
            before = len(failing.requests)
            accept_event(other, "order.created", PAYLOAD, publisher=publisher, topology=settings.topology)
            requests = failing.wait_for(before + 3, timeout=20)[before:]
            gaps.append([b.received_at - a.received_at for a, b in zip(requests, requests[1:])])
            failing.responder = sequence([500, 500, 200])
    return gaps


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("step core (--events: default 2,000)")
    group.add_argument("--database", choices=["sqlite", "postgresql"], default="postgresql")
    group.add_argument("--failing", action="store_true",
                       help="the endpoint answers 500 to every call: each attempt is recorded and its retry published")


@section_of("core", "Delivery core (`--only core`)")
def section(step: dict[str, Any], r: dict[str, Any], add: Add) -> None:
    add(step["machine"])
    add("")
    add(f"database: {step['database']}, events: {step['events']}, one worker process (prefetch {step['prefetch']}, "
        f"up to {step['max_in_flight']} calls in flight per endpoint)")
    add(f"ingest (store + publish, no HTTP): {step['ingest_rate']:.0f} events/s")
    what = "attempts, every one failing and its retry published" if step["failing"] else "delivery"
    add(f"{what}: {step['rate']:.0f}/s sustained (after the first 10%), {step['attempts_logged']} attempts logged, "
        f"worker CPU {step['worker_cpu_ms']:.2f} ms per attempt "
        f"({', '.join(f'{name} {ms:.2f}' for name, ms in step['thread_cpu_ms'].items())})")
    gaps = step["retry_gaps"]
    if gaps:
        first, second = [g[0] for g in gaps], [g[1] for g in gaps]
        add(f"retry gaps, ladder 1s,2s: first {min(first):.2f}-{max(first):.2f}s (mean {statistics.mean(first):.2f}), "
            f"second {min(second):.2f}-{max(second):.2f}s (mean {statistics.mean(second):.2f})")
    add("")


STEP = Step("core", "delivery core", core, lambda context: 900, (section,), full_run=False, add_arguments=add_arguments)
