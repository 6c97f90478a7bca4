"""The clock process: periodic work (the outbox relay, expiring idempotency keys).

More than one may run: on PostgreSQL each pass takes an advisory lock so only one
acts at a time; on SQLite one clock process is expected. ``python -m webhooks.clock``.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from typing import Any, Callable

import peewee

from webhooks import db, logs
from webhooks.config import Settings
from webhooks.ingest import IDEMPOTENCY_TTL
from webhooks.models import IdempotencyKey
from webhooks.outbox import relay_once
from webhooks.publisher import Publisher
from webhooks.timeutil import utcnow

log = logging.getLogger(__name__)

#: Seconds between passes.
TICK_SECONDS = 1.0

#: Arbitrary constant naming the clock's advisory lock on PostgreSQL.
ADVISORY_LOCK_KEY = 7_726_391_004


def expire_idempotency_keys() -> int:
    """Forget idempotency keys older than their 24 hours."""
    return IdempotencyKey.delete().where(IdempotencyKey.created_at < utcnow() - IDEMPOTENCY_TTL).execute()


def with_lock(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` if this clock holds the lock (always on SQLite); else None."""
    if not db.is_postgres():
        return fn()
    with db.database.connection_context():
        (got,) = db.database.execute_sql("SELECT pg_try_advisory_lock(%s)", (ADVISORY_LOCK_KEY,)).fetchone()
        if not got:
            return None
        try:
            return fn()
        finally:
            db.database.execute_sql("SELECT pg_advisory_unlock(%s)", (ADVISORY_LOCK_KEY,))


def tick(settings: Settings, publisher: Publisher) -> None:
    """One pass of every periodic job."""

    def jobs() -> None:
        relay_once(publisher, settings.topology, settings.relay_grace)
        expire_idempotency_keys()

    with_lock(jobs)


def run(settings: Settings, stop: threading.Event) -> None:
    publisher = Publisher(settings.amqp_url, settings.publish_timeout)
    log.info("clock running every %.1fs", TICK_SECONDS)
    while not stop.is_set():
        try:
            tick(settings, publisher)
        except (peewee.OperationalError, peewee.InterfaceError) as error:
            log.warning("database unavailable in clock pass: %s", error)
            db.reset_connection()
        stop.wait(TICK_SECONDS)
    publisher.close()


def main() -> int:
    logs.configure()
    settings = Settings.from_env()
    db.init_database(settings.database_url)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    run(settings, stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
