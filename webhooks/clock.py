"""The clock process: periodic jobs, each on its own interval.

The outbox relay, the paced release of parked deliveries, probes for offline
endpoints, operational events and alert emails, disabling endpoints that keep
failing, and expiring idempotency keys. More than one clock may run: on PostgreSQL a
pass takes an advisory lock so only one acts at a time; on SQLite run one.
``python -m webhooks.clock``.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import peewee

from webhooks import alert_emails, db, logs, operational, recovery
from webhooks.config import Settings
from webhooks.ingest import IDEMPOTENCY_TTL
from webhooks.mailer import SmtpConfig
from webhooks.models import IdempotencyKey
from webhooks.outbox import relay_once
from webhooks.publisher import Publisher
from webhooks.timeutil import utcnow

log = logging.getLogger(__name__)

#: The loop wakes this often (seconds); each job runs when its own interval is up.
TICK_SECONDS = 0.02

#: Seconds between passes of the alert-email sender.
EMAIL_EVERY_SECONDS = 2.0

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


@dataclass
class Job:
    name: str
    every: float
    run: Callable[[], Any]
    due: float = 0.0


def jobs(settings: Settings, publisher: Publisher) -> list[Job]:
    """Every periodic job with its interval (seconds)."""
    topology = settings.topology
    releaser = recovery.Releaser(settings.release_rate)
    return [
        Job("relay", 1.0, lambda: relay_once(publisher, topology, settings.relay_grace)),
        Job("release", 0.02, lambda: releaser.release_parked(publisher, topology)),
        Job("probes", 1.0, lambda: recovery.promote_probes(publisher, topology)),
        Job("operational events", 0.5, lambda: operational.raise_pending(publisher, topology)),
        Job("disable failing", 60.0, lambda: recovery.disable_failing(settings.disable_after)),
        Job("idempotency keys", 300.0, expire_idempotency_keys),
    ]


def run_due(schedule: list[Job]) -> None:
    """Run every job whose time has come (under the lock), then set its next time."""
    now = time.monotonic()
    due = [job for job in schedule if job.due <= now]
    if not due:
        return

    def run_all() -> None:
        for job in due:
            try:
                job.run()
            except (peewee.OperationalError, peewee.InterfaceError) as error:
                log.warning("database unavailable in clock job %s: %s", job.name, error)
                db.reset_connection()
            except Exception:  # noqa: BLE001 - one failing job must not stop the others
                log.exception("clock job %s failed", job.name)
            job.due = time.monotonic() + job.every

    try:
        with_lock(run_all)
    except (peewee.OperationalError, peewee.InterfaceError) as error:
        log.warning("database unavailable for the clock lock: %s", error)
        db.reset_connection()


def tick(settings: Settings, publisher: Publisher) -> None:
    """Run every job once, now (tests and scripts)."""
    run_due(jobs(settings, publisher))


def send_emails(settings: Settings, stop: threading.Event) -> None:
    """Alert emails, on their own thread: a slow SMTP server must not hold up the relay.

    ``send_pending`` claims each row itself, so it needs no clock lock.
    """
    while not stop.is_set():
        try:
            alert_emails.send_pending(settings.smtp_url, settings.public_url)
        except (peewee.OperationalError, peewee.InterfaceError) as error:
            log.warning("database unavailable for alert emails: %s", error)
            db.reset_connection()
        except Exception:  # noqa: BLE001 - keep trying on the next pass
            log.exception("sending alert emails failed")
        db.release_connection()
        stop.wait(EMAIL_EVERY_SECONDS)


def run(settings: Settings, stop: threading.Event) -> None:
    if settings.smtp_url:
        SmtpConfig.parse(settings.smtp_url)  # a bad SMTP_URL stops the clock now, not every pass
    publisher = Publisher(settings.amqp_url, settings.publish_timeout)
    schedule = jobs(settings, publisher)
    mailer = threading.Thread(target=send_emails, args=(settings, stop), name="alert-emails", daemon=True)
    mailer.start()
    log.info("clock running: %s, alert emails every %gs", ", ".join(f"{job.name} every {job.every:g}s" for job in schedule),
             EMAIL_EVERY_SECONDS)
    while not stop.is_set():
        run_due(schedule)
        stop.wait(TICK_SECONDS)
    mailer.join(timeout=30)
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
