"""The retention purge (``RETENTION_DAYS``): old, finished events go, with their deliveries and attempts.

An event is purged once (1) it was created more than ``RETENTION_DAYS`` ago, (2) none of its
deliveries still waits for an attempt (pending, retrying or parked: those are never purged,
however old) and (3) none of its deliveries changed within the period (a resend last week keeps
the whole history of a two-month-old event). Everything about an event goes together, so what
is kept is always whole: its attempts, its deliveries, its idempotency keys and the event.

The purge removes a few hundred events per transaction (``BATCH_EVENTS``, with their deliveries
and attempts a few thousand rows), found oldest first on the ``(created_at, id)`` index, so it
never holds a lock for long; ingestion, which only inserts, never waits on it beyond one batch
(and on PostgreSQL not at all: the purge locks only the rows it deletes and never the tenant row).
In the same transaction each tenant's ``RetentionMark`` is raised to the highest ``seq`` removed:
the catch-up feed (``GET /v1/events?after=``) answers 410 to a cursor below it (``stale_cursor``)
instead of skipping the purged events silently.

The clock runs ``Purger.run`` as one of its jobs: batches for at most ``RUN_SECONDS`` per pass
(the other clock jobs wait for it), pass after pass until caught up, then a look every ``IDLE_SECONDS``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Callable, Iterable, Sequence

import peewee

from webhooks.storage.db import locking, write
from webhooks.storage.models import Attempt, Delivery, Event, IdempotencyKey, ManualAttempt, RetentionMark
from webhooks.storage.statuses import UNFINISHED_STATUSES
from webhooks.storage.timeutil import utcnow

log = logging.getLogger(__name__)

#: Events examined (and at most purged) per transaction. With a delivery or two each and
#: their attempts, a few thousand rows: a transaction of some tens of milliseconds.
BATCH_EVENTS = 500

#: Longest one clock pass spends purging (seconds); the other clock jobs run between passes.
RUN_SECONDS = 0.25

#: The clock calls the purge this often (seconds); while there is a backlog each call purges.
PASS_EVERY_SECONDS = 0.5

#: Once caught up, the purge looks for newly expired events this often (seconds).
IDLE_SECONDS = 300.0

#: Where a pass stopped in the ``(created_at, id)`` order; None: at the start.
Position = tuple[datetime, str] | None


@dataclass(frozen=True)
class Candidate:
    """An event old enough to purge, if nothing about it is still going on."""

    id: str
    tenant_id: str
    seq: int
    created_at: datetime


@dataclass(frozen=True)
class Purged:
    """What one or more batches removed; ``examined`` counts the old events looked at."""

    examined: int = 0
    events: int = 0
    deliveries: int = 0
    attempts: int = 0

    def __add__(self, other: "Purged") -> "Purged":
        return Purged(self.examined + other.examined, self.events + other.events,
                      self.deliveries + other.deliveries, self.attempts + other.attempts)


def cutoff(retention_days: int, now: datetime | None = None) -> datetime:
    """Events (and delivery activity) before this are past the retention period."""
    return (now or utcnow()) - timedelta(days=retention_days)


def _candidates(before: datetime, after: Position, limit: int) -> list[Candidate]:
    """The oldest events created before ``before``, after ``after`` in ``(created_at, id)`` order."""
    query = Event.select(Event.id, Event.tenant, Event.seq, Event.created_at).where(Event.created_at < before)
    if after is not None:
        query = query.where(peewee.Tuple(Event.created_at, Event.id) > peewee.Tuple(*after))
    rows = query.order_by(Event.created_at, Event.id).limit(limit).tuples()
    return [Candidate(*row) for row in rows]


def _still_needed(event_ids: Sequence[str], before: datetime) -> set[str]:
    """Those of ``event_ids`` with a delivery unfinished or changed since ``before``.

    Their deliveries are locked (PostgreSQL) until the batch commits, so none can start
    again (a resend) between this look and the delete.
    """
    rows = locking(Delivery.select(Delivery.event, Delivery.status, Delivery.updated_at)
                   .where(Delivery.event.in_(event_ids))).tuples()
    return {event_id for event_id, status, updated_at in rows
            if status in UNFINISHED_STATUSES or updated_at >= before}


def _raise_marks(purged: Iterable[Candidate], now: datetime) -> None:
    """Raise each tenant's ``RetentionMark`` to the highest ``seq`` purged (never lower it)."""
    highest: dict[str, int] = {}
    for event in purged:
        highest[event.tenant_id] = max(event.seq, highest.get(event.tenant_id, 0))
    for tenant_id, seq in sorted(highest.items()):  # one lock order for every purger
        RetentionMark.insert(tenant=tenant_id, purged_seq=seq, purged_at=now).on_conflict(
            conflict_target=[RetentionMark.tenant],
            update={
                RetentionMark.purged_seq: peewee.Case(
                    None, [(RetentionMark.purged_seq < peewee.EXCLUDED.purged_seq, peewee.EXCLUDED.purged_seq)],
                    RetentionMark.purged_seq),
                RetentionMark.purged_at: peewee.EXCLUDED.purged_at,
            },
        ).execute()


def delete_events(ids: Sequence[str]) -> Purged:
    """Delete the events ``ids`` with their deliveries, attempts, resend records and idempotency
    keys (children first). Call inside a transaction."""
    attempts = Attempt.delete().where(Attempt.event.in_(ids)).execute()
    ManualAttempt.delete().where(ManualAttempt.event.in_(ids)).execute()  # who asked for a resend
    deliveries = Delivery.delete().where(Delivery.event.in_(ids)).execute()
    IdempotencyKey.delete().where(IdempotencyKey.event.in_(ids)).execute()
    events = Event.delete().where(Event.id.in_(ids)).execute()
    return Purged(len(ids), events, deliveries, attempts)


def purge_batch(before: datetime, after: Position = None, limit: int = BATCH_EVENTS) -> tuple[Purged, Position]:
    """Purge what may go among the next ``limit`` events created before ``before``, in one transaction.

    Returns what was removed and the position to carry on from (None once past the last old event).
    """
    candidates = _candidates(before, after, limit)
    if not candidates:
        return Purged(), None
    with write():
        needed = _still_needed([c.id for c in candidates], before)
        doomed = [c for c in candidates if c.id not in needed]
        purged = Purged(examined=len(candidates))
        if doomed:
            removed = delete_events([c.id for c in doomed])
            _raise_marks(doomed, utcnow())
            purged = Purged(len(candidates), removed.events, removed.deliveries, removed.attempts)
    last = candidates[-1]
    position: Position = (last.created_at, last.id) if len(candidates) == limit else None
    return purged, position


def purge(retention_days: int, now: datetime | None = None, limit: int = BATCH_EVENTS) -> Purged:
    """Purge everything past the retention period, batch after batch, until none is left."""
    before = cutoff(retention_days, now)
    total, position = Purged(), None
    while True:
        purged, position = purge_batch(before, position, limit)
        total += purged
        if position is None:
            return total


class Purger:
    """The clock's retention job: a bounded slice of the purge per pass, resumed on the next.

    A pass carries on from where the previous one stopped; once it reaches the newest old
    event it rests ``idle_seconds``, then starts again from the oldest (events kept because
    a delivery was still going on are looked at again then).
    """

    def __init__(self, retention_days: int, *, run_seconds: float = RUN_SECONDS, idle_seconds: float = IDLE_SECONDS,
                 limit: int = BATCH_EVENTS, clock: Callable[[], float] = time.monotonic) -> None:
        self.retention_days = retention_days
        self.run_seconds = run_seconds
        self.idle_seconds = idle_seconds
        self.limit = limit
        self.clock = clock
        self.position: Position = None
        self.resume_at = 0.0

    @property
    def caught_up(self) -> bool:
        """True while resting: the last pass reached the newest event past the period."""
        return self.clock() < self.resume_at

    def run(self) -> Purged:
        """One pass: batches until caught up or ``run_seconds`` are spent (nothing while resting)."""
        total = Purged()
        if self.caught_up:
            return total
        deadline = self.clock() + self.run_seconds
        before = cutoff(self.retention_days)
        while True:
            purged, self.position = purge_batch(before, self.position, self.limit)
            total += purged
            if self.position is None:
                self.resume_at = self.clock() + self.idle_seconds
                break
            if self.clock() >= deadline:
                break
        if total.events:
            log.info("retention: purged %d events, %d deliveries and %d attempts older than %d days",
                     total.events, total.deliveries, total.attempts, self.retention_days)
        return total


@dataclass(frozen=True)
class StaleCursor:
    """A catch-up cursor that fell into the purged range: what to tell the client."""

    after: int
    purged_seq: int
    #: The first event kept after the purged range (None: none yet).
    next_seq: int | None

    def message(self, retention_days: int) -> str:
        following = (f"; the oldest event kept after it is seq={self.next_seq}" if self.next_seq is not None
                     else "; no event is kept after it yet")
        return (f"after={self.after} is older than the retention period ({retention_days} days): "
                f"events up to seq={self.purged_seq} were purged. Continue with after={self.purged_seq}{following}")


def purged_seq(tenant_id: str) -> int:
    """The highest ``seq`` of ``tenant_id`` purged so far (0: none)."""
    row = RetentionMark.select(RetentionMark.purged_seq).where(RetentionMark.tenant == tenant_id).tuples().first()
    return row[0] if row else 0


def stale_cursor(tenant_id: str, after: int) -> StaleCursor | None:
    """The gap between ``after`` and what is kept, if events after the cursor were purged.

    ``after=0`` (a client starting from the beginning) is never stale: it reads what is kept.
    Call it *after* reading the page: a purge committed in between then shows here, so the
    client is told rather than handed a page with a hole in it.
    """
    if after <= 0:
        return None
    purged = purged_seq(tenant_id)
    if after >= purged:
        return None
    following = (Event.select(peewee.fn.MIN(Event.seq))
                 .where((Event.tenant == tenant_id) & (Event.seq > purged)).scalar())
    return StaleCursor(after, purged, following)
