"""Delivery-core benchmark: throughput of one worker process and the gaps between retries.

Usage: ``python bench/core.py [--events 2000] [--database sqlite|postgresql] [--failing]``; with
``BENCH_PROFILE=/tmp/worker.raw`` the worker runs under ``py-spy record`` (raw stacks).
Events are stored and published through the same code path as ``POST /v1/events``
(without HTTP), one worker process delivers them to a fast local receiver, and the
time from the first to the last arrival gives deliveries per second (every attempt
logged in the database). A second phase sends events to an endpoint that fails
twice and prints the observed gaps against the ladder. With ``--failing`` the endpoint
answers 500 to everything, so every attempt is recorded and its retry published.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from bench.local import free_port, pg_admin  # noqa: E402
from bench.receiver import FAIL_PREFIX, start as start_receiver  # noqa: E402
from webhooks.storage import db  # noqa: E402
from webhooks.cli import create_tenant, migrate  # noqa: E402
from webhooks.config import Settings  # noqa: E402
from webhooks.storage.ids import new_id  # noqa: E402
from webhooks.ingest.accept import accept_event  # noqa: E402
from webhooks.storage.models import Attempt, Endpoint, Tenant  # noqa: E402
from webhooks.messaging.brokers import connect  # noqa: E402
from webhooks.messaging.publisher import Publisher  # noqa: E402
from webhooks.delivery.signing import generate_secret  # noqa: E402

PAYLOAD = {"order": {"id": "ord_123", "amount": 4200, "currency": "EUR", "lines": [{"sku": f"sku-{i}", "qty": i} for i in range(20)]}}


def database_url(kind: str) -> str:
    """A fresh database for one run."""
    if kind == "sqlite":
        return f"sqlite:///{tempfile.mkdtemp()}/bench.db"
    pg_admin(f'CREATE DATABASE "bench_{os.getpid()}"')
    return f"postgresql://postgres@127.0.0.1:5432/bench_{os.getpid()}"


def drop_database(kind: str) -> None:
    """Drop what ``database_url`` created (PostgreSQL)."""
    if kind == "postgresql":
        db.database.obj.close_all()
        pg_admin(f'DROP DATABASE IF EXISTS "bench_{os.getpid()}" WITH (FORCE)')


def machine() -> str:
    return (f"date: {time.strftime('%Y-%m-%d')}  machine: {platform.machine()}, {os.cpu_count()} cores, "
            f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') // 2**30} GiB, Python {platform.python_version()}")


def endpoint(tenant_id: str, url: str) -> None:
    Endpoint.create(id=new_id("ep"), tenant=tenant_id, url=url, secret=generate_secret())


def run_worker(settings: Settings, extra: dict[str, str] | None = None) -> subprocess.Popen:
    env = {**os.environ, "DATABASE_URL": settings.database_url, "QUEUE_PREFIX": settings.queue_prefix,
           "RETRY_LADDER": ",".join(f"{d}ms" for d in settings.ladder.delays_ms), "ALLOW_PRIVATE_TARGETS": "1",
           "LOG_LEVEL": "WARNING", **(extra or {})}
    command = [sys.executable, "-m", "webhooks.worker"] if not os.environ.get("BENCH_WORKER_SCRIPT") else [sys.executable, os.environ["BENCH_WORKER_SCRIPT"]]
    if os.environ.get("BENCH_PROFILE"):  # py-spy raw stacks of the worker, e.g. BENCH_PROFILE=/tmp/worker.raw
        command = ["py-spy", "record", "--format", "raw", "--rate", "200", "--gil", "--output", os.environ["BENCH_PROFILE"],
                   "--", *command]
    return subprocess.Popen(command, env=env)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its reaped children so far (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of each thread of a process, summed by thread name."""
    totals: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        totals[name] = totals.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return totals


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--database", choices=["sqlite", "postgresql"], default="postgresql")
    parser.add_argument("--failing", action="store_true",
                        help="the endpoint answers 500 to every call: each attempt is recorded and its retry published")
    args = parser.parse_args()

    settings = Settings.from_env(env={}, database_url=database_url(args.database), queue_prefix=f"bench_{os.getpid()}",
                                 ladder="1s,2s", allow_private_targets=True)
    connection = connect(settings.amqp_url, 5)
    settings.topology.declare(connection.channel())
    db.init_database(settings.database_url)
    migrate()
    tenant = Tenant.get_by_id(create_tenant("bench")["id"])
    port = free_port()
    counter = start_receiver(port)
    endpoint(tenant.id, f"http://127.0.0.1:{port}{FAIL_PREFIX.decode() if args.failing else '/'}hook")
    publisher = Publisher(settings.amqp_url)

    started = time.monotonic()
    for _ in range(args.events):
        accept_event(tenant, "order.created", PAYLOAD, publisher=publisher, topology=settings.topology)
    ingest_rate = args.events / (time.monotonic() - started)

    worker = run_worker(settings)
    try:
        deadline = time.monotonic() + 600
        while counter.count < args.events and time.monotonic() < deadline:
            time.sleep(0.05)
        worker_cpu = cpu_seconds(worker.pid)
        threads = thread_cpu(worker.pid)
        arrivals = counter.arrivals
        steady = arrivals[len(arrivals) // 10 :]  # after warm-up
        rate = (len(steady) - 1) / (steady[-1] - steady[0])
        time.sleep(1)
        logged = Attempt.select().count()
        # With --failing the retries of every event still queue ahead: the gaps would measure that queue.
        gaps = [] if args.failing else retry_gaps(settings, publisher)
    finally:
        worker.send_signal(signal.SIGINT)  # the worker drains; py-spy writes its profile
        worker.wait()
        settings.topology.delete(connection.channel())
        connection.close()
        drop_database(args.database)

    print(machine())
    print(f"database: {args.database}, events: {args.events}, one worker process (prefetch {settings.worker_prefetch}, "
          f"up to {settings.endpoint_max_in_flight} calls in flight per endpoint)")
    print(f"ingest (store + publish, no HTTP): {ingest_rate:.0f} events/s")
    what = "attempts, every one failing and its retry published" if args.failing else "delivery"
    print(f"{what}: {rate:.0f}/s sustained (after the first 10%), {logged} attempts logged, "
          f"worker CPU {1000 * worker_cpu / args.events:.2f} ms per attempt "
          f"({', '.join(f'{name} {1000 * seconds / args.events:.2f}' for name, seconds in sorted(threads.items()))})")
    if gaps:
        first_gaps = [g[0] for g in gaps]
        second_gaps = [g[1] for g in gaps]
        print(f"retry gaps, ladder 1s,2s: first {min(first_gaps):.2f}-{max(first_gaps):.2f}s (mean {statistics.mean(first_gaps):.2f}), "
              f"second {min(second_gaps):.2f}-{max(second_gaps):.2f}s (mean {statistics.mean(second_gaps):.2f})")


def retry_gaps(settings: Settings, publisher: Publisher) -> list[list[float]]:
    """Seconds between the attempts of 5 events to an endpoint that fails twice (ladder 1s,2s)."""
    from tests.receivers import Receiver, sequence

    gaps: list[list[float]] = []
    with Receiver(sequence([500, 500, 200])) as failing:
        other = Tenant.get_by_id(create_tenant("gaps")["id"])
        endpoint(other.id, failing.url)
        for _ in range(5):
            before = len(failing.requests)
            accept_event(other, "order.created", PAYLOAD, publisher=publisher, topology=settings.topology)
            requests = failing.wait_for(before + 3, timeout=20)[before:]
            gaps.append([b.received_at - a.received_at for a, b in zip(requests, requests[1:])])
            failing.responder = sequence([500, 500, 200])
    return gaps

if __name__ == "__main__":
    main()
