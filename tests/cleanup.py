"""Delete what earlier, interrupted test runs left behind: ``test_*`` queues and databases.

Run by ``./dev test`` before the suite (decision 20). Uses ``rabbitmqctl`` to list
queues (the management plugin may be off) and deletes them over AMQP.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pika
import psycopg2

from webhooks.publisher import connection_parameters

AMQP_URL = os.environ.get("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
POSTGRES_ADMIN_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def stale_queues() -> list[str]:
    if shutil.which("rabbitmqctl") is None:
        return []
    listing = subprocess.run(
        ["rabbitmqctl", "-q", "list_queues", "name", "--no-table-headers"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    return [name.strip() for name in listing.stdout.splitlines() if name.strip().startswith("test_")]


def main() -> int:
    queues = stale_queues()
    if queues:
        connection = pika.BlockingConnection(connection_parameters(AMQP_URL, timeout=5.0))
        channel = connection.channel()
        for queue in queues:
            channel.queue_delete(queue)
        for exchange in {queue.split(".")[0] for queue in queues}:
            channel.exchange_delete(exchange)
        connection.close()
    try:
        admin = psycopg2.connect(POSTGRES_ADMIN_URL)
    except psycopg2.OperationalError:
        admin = None
    dropped = 0
    if admin is not None:
        admin.autocommit = True
        cursor = admin.cursor()
        cursor.execute("SELECT datname FROM pg_database WHERE datname LIKE 'test\\_%%'")
        for (name,) in cursor.fetchall():
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            dropped += 1
        admin.close()
    print(f"cleanup: deleted {len(queues)} stale test queues, {dropped} stale test databases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
