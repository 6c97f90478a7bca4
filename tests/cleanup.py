"""Delete what earlier, interrupted test runs left behind: ``test_*`` queues and databases.

Run by ``./dev test`` before the suite, so queues of runs that were killed do not pile up
on the shared broker. Uses ``rabbitmqctl`` to list
queues (the management plugin may be off) and deletes them over AMQP. A test session
names its queues and database ``test_<pid>_<hex>``; only those whose process is gone
are stale, so a suite running beside another (two checkouts, a developer and CI) keeps
its own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import psycopg2

from webhooks.messaging.brokers import connect

AMQP_URL = os.environ.get("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
POSTGRES_ADMIN_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def is_stale(name: str) -> bool:
    """``test_<pid>_…`` whose test process no longer runs (a name of another shape is stale too)."""
    parts = name.split("_")
    if len(parts) < 3 or not parts[1].isdigit():
        return True
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # somebody else's live process
    return False


def stale_queues() -> list[str]:
    if shutil.which("rabbitmqctl") is None:
        return []
    listing = subprocess.run(
        ["rabbitmqctl", "-q", "list_queues", "name", "--no-table-headers"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    return [name.strip() for name in listing.stdout.splitlines() if name.strip().startswith("test_") and is_stale(name.strip())]


def main() -> int:
    queues = stale_queues()
    if queues:
        connection = connect(AMQP_URL, timeout=5.0)
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
            if not is_stale(name):
                continue
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            dropped += 1
        admin.close()
    print(f"cleanup: deleted {len(queues)} stale test queues, {dropped} stale test databases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
