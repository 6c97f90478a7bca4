"""Bulk replay of dead letters in the background, with its progress in the database.

A ``ReplayJob`` snapshots what matched when it was made: failed deliveries up to the
newest id then, not changed since. Each goes through ``actions.resend`` (trigger
``recover``), which touches ``updated_at``, so a job resumed after a crash skips what
it already replayed: running it twice never resends a delivery twice. Any web worker
can show the progress, and a job whose runner stopped reporting can be resumed.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from datetime import timedelta

import peewee
from flask import Flask

from webhooks import actions
from webhooks.config import Settings
from webhooks.console import audit
from webhooks.console.models import ReplayJob
from webhooks.console.queries import DeliveryFilter
from webhooks.storage.db import connection
from webhooks.storage.models import Delivery
from webhooks.messaging.publisher import Publisher
from webhooks.storage.timeutil import utcnow
from webhooks.storage.statuses import DeliveryStatus

log = logging.getLogger(__name__)

#: Deliveries read per query.
BATCH = 200

#: Progress is written at least this often (seconds), and at the end.
REPORT_EVERY = 0.5

#: A running job that has not reported for this long is taken as dead and may be resumed.
STALE_AFTER = timedelta(seconds=30)

#: When the broker refuses, wait this long (seconds) between tries, this many times, then stop.
BROKER_RETRY_DELAY, BROKER_RETRIES = 2.0, 5

Progress = Callable[[ReplayJob], None]


def _matching(job: ReplayJob) -> peewee.ModelSelect:
    """Failed deliveries matching the job's filters, not touched since the job was made."""
    filters = DeliveryFilter.from_json(job.filters)
    return filters.query().where((Delivery.status == DeliveryStatus.FAILED) & (Delivery.updated_at <= job.created_at))


def selection(job: ReplayJob, *, from_cursor: bool = True) -> peewee.ModelSelect:
    """What is left of the job: its snapshot (up to ``upto_id``) not replayed yet, after its cursor."""
    query = _matching(job).where(Delivery.id <= job.upto_id) if job.upto_id else _matching(job).where(False)
    return query.where(Delivery.id > job.cursor) if job.cursor and from_cursor else query


def create_job(filters: DeliveryFilter, actor: str) -> ReplayJob:
    """A queued job replaying the failed deliveries that match ``filters`` now."""
    job = ReplayJob.create(actor=actor, filters=filters.to_json())
    newest = _matching(job).order_by(Delivery.id.desc()).first()
    job.upto_id = newest.id if newest else None
    job.total = selection(job).count()
    if not job.total:
        job.status, job.finished_at = "done", utcnow()  # nothing to do: finished at once
    job.save()
    return job


def is_stale(job: ReplayJob) -> bool:
    """True when the job is running but its runner stopped reporting (a killed process)."""
    return job.status == "running" and (job.heartbeat_at is None or job.heartbeat_at < utcnow() - STALE_AFTER)


def _claim(job_id: int) -> str | None:
    """Take the job (queued, failed, or running with a stale heartbeat); the runner token, or None."""
    token, now = secrets.token_hex(8), utcnow()
    resumable = ReplayJob.status.in_(("queued", "failed")) | (
        (ReplayJob.status == "running") & (ReplayJob.heartbeat_at < now - STALE_AFTER)
    )
    taken = (
        ReplayJob.update(status="running", runner=token, heartbeat_at=now, error=None)
        .where((ReplayJob.id == job_id) & resumable)
        .execute()
    )
    return token if taken else None


def _report(job: ReplayJob, token: str, **changes: object) -> bool:
    """Write progress while still the runner; False when another runner took over."""
    changes.setdefault("heartbeat_at", utcnow())
    updated = (
        ReplayJob.update(done=job.done, cursor=job.cursor, **changes)
        .where((ReplayJob.id == job.id) & (ReplayJob.runner == token))
        .execute()
    )
    return bool(updated)


def _resend(delivery: Delivery, requester: actions.Requester, publisher: Publisher, settings: Settings) -> None:
    for attempt in range(BROKER_RETRIES):
        try:
            actions.resend(delivery, trigger="recover", requester=requester, publisher=publisher,
                           topology=settings.topology)
            return
        except actions.BrokerUnavailable:
            if attempt == BROKER_RETRIES - 1:
                raise
            time.sleep(BROKER_RETRY_DELAY)


def run_job(job_id: int, settings: Settings, progress: Progress | None = None) -> ReplayJob:
    """Run (or resume) the job to the end in this thread; returns the job as it finished."""
    token = _claim(job_id)
    if token is None:
        return ReplayJob.get_by_id(job_id)  # someone else runs it, or it is finished
    job = ReplayJob.get_by_id(job_id)
    # What an earlier run replayed but had not reported yet is out of the selection already.
    job.done = job.total - selection(job, from_cursor=False).count()
    publisher = Publisher(settings.amqp_url, settings.publish_timeout)
    reported = time.monotonic()
    try:
        while batch := list(selection(job).order_by(Delivery.id).limit(BATCH)):
            for delivery in batch:
                _resend(delivery, audit.requester_of(job.actor), publisher, settings)
                job.done, job.cursor = job.done + 1, delivery.id
                if time.monotonic() - reported >= REPORT_EVERY:
                    if not _report(job, token):
                        return ReplayJob.get_by_id(job_id)  # taken over: stop quietly
                    reported = time.monotonic()
                    if progress:
                        progress(job)
        job.done = job.total  # each was replayed, or left the dead letters some other way
        _report(job, token, status="done", finished_at=utcnow())
    except Exception as error:  # noqa: BLE001 - any failure is shown on the job; it can be resumed
        log.warning("replay job %s stopped: %s", job_id, error)
        _report(job, token, status="failed", error=f"{type(error).__name__}: {error}")
    finally:
        publisher.close()
    job = ReplayJob.get_by_id(job_id)
    if progress:
        progress(job)
    return job


def run_in_background(app: Flask, job_id: int) -> threading.Thread:
    """Start the job in a thread of this process; the request that started it returns at once."""
    settings: Settings = app.extensions["webhooks.settings"]

    def target() -> None:
        with app.app_context(), connection():
            run_job(job_id, settings)

    thread = threading.Thread(target=target, name=f"replay-{job_id}", daemon=True)
    thread.start()
    return thread
