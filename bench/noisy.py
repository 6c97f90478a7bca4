"""Noisy-neighbour benchmark: 9 healthy endpoints, with and without 1 that always times out.

Usage: ``python bench/noisy.py [--events 1000] [--timeout 5]``. Each event goes to every
endpoint of the tenant. Throughput to the healthy endpoints with the dead one present
must stay at least 90% of their throughput without it: its in-flight cap bounds the
calls it can hold, and after 5 consecutive timeouts it is offline and parks.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


from bench.core import PAYLOAD, database_url, drop_database, endpoint, machine, run_worker  # noqa: E402
from bench.local import free_port  # noqa: E402
from bench.receiver import start as start_receiver  # noqa: E402
from webhooks.storage import db  # noqa: E402
from webhooks.cli import create_tenant, migrate  # noqa: E402
from webhooks.config import Settings  # noqa: E402
from webhooks.ingest.accept import accept_event  # noqa: E402
from webhooks.storage.models import Tenant  # noqa: E402
from webhooks.messaging.brokers import connect  # noqa: E402
from webhooks.messaging.publisher import Publisher  # noqa: E402


def start_black_hole(port: int) -> None:
    """A server that accepts connections and never answers (every call times out)."""

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(3600)

    def serve() -> None:
        loop = asyncio.new_event_loop()
        loop.run_until_complete(asyncio.start_server(hold, "127.0.0.1", port))
        loop.run_forever()

    threading.Thread(target=serve, daemon=True).start()
    time.sleep(0.2)


def run(events: int, with_dead: bool, timeout: float, kind: str) -> float:
    """Healthy deliveries per second for one configuration."""
    settings = Settings.from_env(env={}, database_url=database_url(kind), queue_prefix=f"bench_noisy_{os.getpid()}",
                                 allow_private_targets=True, delivery_timeout=timeout)
    connection = connect(settings.amqp_url, 5)
    settings.topology.declare(connection.channel())
    db.init_database(settings.database_url)
    migrate()
    tenant = Tenant.get_by_id(create_tenant("noisy")["id"])
    counters = []
    for _ in range(9):
        port = free_port()
        counters.append(start_receiver(port))
        endpoint(tenant.id, f"http://127.0.0.1:{port}/hook")
    if with_dead:
        port = free_port()
        start_black_hole(port)
        endpoint(tenant.id, f"http://127.0.0.1:{port}/hook")
    publisher = Publisher(settings.amqp_url)
    for _ in range(events):
        accept_event(tenant, "order.created", PAYLOAD, publisher=publisher, topology=settings.topology)
    worker = run_worker(settings, {"DELIVERY_TIMEOUT": str(timeout)})
    started = time.monotonic()
    expected = 9 * events
    while sum(c.count for c in counters) < expected and time.monotonic() - started < 600:
        time.sleep(0.05)
    elapsed = time.monotonic() - started
    worker.terminate()
    worker.wait()
    settings.topology.delete(connection.channel())
    connection.close()
    drop_database(kind)
    return expected / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--database", choices=["sqlite", "postgresql"], default="postgresql")
    args = parser.parse_args()
    alone = run(args.events, False, args.timeout, args.database)
    noisy = run(args.events, True, args.timeout, args.database)
    print(machine())
    print(f"{args.events} events x 9 healthy endpoints, DELIVERY_TIMEOUT={args.timeout}s, database {args.database}, one worker process (default settings)")
    print(f"healthy throughput alone: {alone:.0f} deliveries/s")
    print(f"healthy throughput with 1 endpoint that always times out: {noisy:.0f} deliveries/s ({noisy / alone:.0%})")


if __name__ == "__main__":
    main()
