"""The clock process: periodic jobs, each on its own interval, and the release loop.

Periodic jobs: the outbox relay, probes for offline endpoints, operational events,
disabling endpoints that keep failing, expiring idempotency keys, the retention purge
(``RETENTION_DAYS``, a bounded slice per pass) and that of deleted tenants; alert emails on
a thread of their own. The paced, in-order release of parked deliveries runs on its
own thread too (``release_loop``): it looks again as soon as a released delivery can
be done or the next rate slot opens, and idles while no endpoint is recovering.

More than one clock may run: on PostgreSQL a pass of the periodic jobs takes an
advisory lock so only one acts at a time, and the release loop holds a second one for
as long as it runs, so exactly one clock releases; on SQLite run one.
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

from webhooks import logs, metrics, sealing, tenants
from webhooks.observability import tracing
from webhooks.delivery import sweeper
from webhooks.health import alert_emails, operational, probes, recovery
from webhooks.storage import db, retention
from webhooks.config import Settings
from webhooks.ingest.idempotency import IDEMPOTENCY_TTL
from webhooks.health.mailer import SmtpConfig
from webhooks.storage.models import IdempotencyKey, IdempotentResponse
from webhooks.messaging.outbox import relay_once
from webhooks.messaging.publisher import Publisher
from webhooks.health.releaser import Releaser
from webhooks.storage.timeutil import utcnow

log = logging.getLogger(__name__)

#: The loop wakes this often (seconds); each job runs when its own interval is up.
TICK_SECONDS = 0.02

#: Offline endpoints due for a probe are looked for this often (seconds): a probe comes at
#: most this late after its time (``PROBE_INTERVAL``).
PROBE_EVERY_SECONDS = 1.0

#: Seconds between passes of the alert-email sender.
EMAIL_EVERY_SECONDS = 2.0

#: Arbitrary constant naming the clock's advisory lock on PostgreSQL.
ADVISORY_LOCK_KEY = 7_726_391_004

#: Arbitrary constant naming the release loop's advisory lock (one releaser among clocks).
RELEASE_LOCK_KEY = 7_726_391_005

#: A clock whose release loop does not hold the release lock tries again this often (seconds).
RELEASE_STANDBY_SECONDS = 1.0

#: After an error the release loop waits this long before its next pass (seconds).
RELEASE_ERROR_PAUSE_SECONDS = 1.0


def expire_idempotency_keys() -> int:
    """Forget idempotency keys older than their 24 hours: ingestion's and the Svix API's answers."""
    cutoff = utcnow() - IDEMPOTENCY_TTL
    return (IdempotencyKey.delete().where(IdempotencyKey.created_at < cutoff).execute()
            + IdempotentResponse.delete().where(IdempotentResponse.created_at < cutoff).execute())


def with_lock(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` if this clock holds the lock (always on SQLite); else None."""
    if not db.is_postgres():
        return fn()
    with db.database.connection_context():
        if not db.try_advisory_lock(ADVISORY_LOCK_KEY):
            return None
        try:
            return fn()
        finally:
            db.advisory_unlock(ADVISORY_LOCK_KEY)


class SessionLock:
    """A PostgreSQL advisory lock that this thread keeps across passes (always held on SQLite).

    The lock belongs to the database session: it is taken on this thread's connection
    and lasts until released or until that connection is gone. ``held`` notices a new
    connection (the old one died and was replaced) and takes the lock again before
    saying yes. The thread must keep its connection (never hand it back to the pool)
    while it holds the lock.
    """

    def __init__(self, key: int) -> None:
        self.key = key
        #: The connection holding the lock; kept referenced so its identity stays unique.
        self._connection: Any = None

    def held(self) -> bool:
        """True if this thread holds the lock now (taking it if it is free)."""
        if not db.is_postgres():
            return True
        connection = db.database.connection()
        if connection is self._connection:
            return True
        self._connection = None
        got = db.try_advisory_lock(self.key)
        if got:
            self._connection = connection
        return got

    def release(self) -> None:
        """Let another clock take the lock (no-op if this thread does not hold it)."""
        holder, self._connection = self._connection, None
        if holder is None or db.database.is_closed() or db.database.connection() is not holder:
            return
        db.advisory_unlock(self.key)


def release_loop(settings: Settings, stop: threading.Event, publisher: Publisher | None = None) -> None:
    """Release parked deliveries of recovering endpoints until ``stop`` is set (the clock's thread).

    Each pass is cheap while nothing can be released; the pause between passes comes
    from the releaser (``Releaser.next_pass_in``): down to a millisecond while a released
    delivery is about to be done, up to ``IDLE_SECONDS`` while nothing recovers.
    """
    own_publisher = publisher is None
    publisher = publisher or Publisher(settings.amqp_url, settings.publish_timeout)
    releaser = Releaser(settings.release_rate)
    lock = SessionLock(RELEASE_LOCK_KEY)
    topology = settings.topology
    try:
        while not stop.is_set():
            try:
                if lock.held():
                    releaser.release_parked(publisher, topology)
                    pause = releaser.next_pass_in()
                else:
                    pause = RELEASE_STANDBY_SECONDS
            except (peewee.OperationalError, peewee.InterfaceError) as error:
                log.warning("database unavailable for the release loop: %s", error)
                db.reset_connection()
                pause = RELEASE_ERROR_PAUSE_SECONDS
            except Exception:  # noqa: BLE001 - keep releasing on the next pass
                log.exception("releasing parked deliveries failed")
                pause = RELEASE_ERROR_PAUSE_SECONDS
            if pause > 0:
                stop.wait(pause)
    finally:
        try:
            lock.release()
        except (peewee.OperationalError, peewee.InterfaceError):
            db.reset_connection()  # the session is gone, and its lock with it
        if not db.database.is_closed() and not db.database.in_transaction():
            db.database.close()  # this thread's connection: back to the pool (PostgreSQL) or closed
        if own_publisher:
            publisher.close()


@dataclass
class Job:
    name: str
    every: float
    run: Callable[[], Any]
    due: float = 0.0


def jobs(settings: Settings, publisher: Publisher) -> list[Job]:
    """Every periodic job with its interval (seconds)."""
    topology = settings.topology
    purger = retention.Purger(settings.retention_days)
    return [
        Job("relay", 1.0, lambda: relay_once(publisher, topology, settings.relay_grace)),
        Job("probes", PROBE_EVERY_SECONDS, lambda: probes.probe_due(publisher, topology, settings.probe_interval)),
        Job("operational events", 0.5, lambda: operational.raise_pending(publisher, topology)),
        Job("disable failing", 60.0, lambda: recovery.disable_failing(settings.disable_after)),
        Job("lost messages", sweeper.SWEEP_EVERY_SECONDS, lambda: sweeper.sweep(publisher, topology, settings.amqp_url)),
        Job("idempotency keys", 300.0, expire_idempotency_keys),
        Job("retention", retention.PASS_EVERY_SECONDS, purger.run),
        Job("deleted tenants", 60.0, tenants.purge_deleted),
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
                # The pass ends here: the connection is reset below, once ``with_lock`` has closed its
                # connection context (resetting inside it emptied peewee's stack and the exit crashed).
                log.warning("database unavailable in clock job %s: %s", job.name, error)
                raise
            except Exception:  # noqa: BLE001 - one failing job must not stop the others
                log.exception("clock job %s failed", job.name)
            job.due = time.monotonic() + job.every

    try:
        with_lock(run_all)
    except (peewee.OperationalError, peewee.InterfaceError) as error:
        log.warning("database unavailable for the clock's pass: %s", error)
        db.reset_connection()


def tick(settings: Settings, publisher: Publisher) -> None:
    """Run every periodic job once, now, and one release pass (tests and scripts)."""
    run_due(jobs(settings, publisher))
    lock = SessionLock(RELEASE_LOCK_KEY)
    try:
        if lock.held():  # not while a running clock's release loop holds it
            Releaser(settings.release_rate).release_parked(publisher, settings.topology)
    finally:
        lock.release()


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
    releaser = threading.Thread(target=release_loop, args=(settings, stop), name="release", daemon=True)
    releaser.start()
    log.info("clock running: %s; an offline endpoint probed %gs after it went offline, then at most every %gs "
             "(PROBE_INTERVAL); release of parked deliveries at most %g/s per endpoint; alert emails every %gs",
             ", ".join(f"{job.name} every {job.every:g}s" for job in schedule), settings.probe_interval.first,
             settings.probe_interval.longest, settings.release_rate, EMAIL_EVERY_SECONDS)
    while not stop.is_set():
        run_due(schedule)
        stop.wait(TICK_SECONDS)
    releaser.join(timeout=30)
    mailer.join(timeout=30)
    publisher.close()


def main() -> int:
    logs.configure()
    settings = Settings.from_env()
    db.init_database(settings.database_url)
    sealing.configure(settings.secrets_key)  # opens the endpoints' secrets (instance/secrets_key if unset)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    tracing.configure("clock", count_dropped=metrics.spans_dropped)
    try:
        run(settings, stop)
    finally:
        tracing.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
