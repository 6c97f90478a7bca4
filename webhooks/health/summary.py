"""What an endpoint's page says about its health: what waits for it, how it answered lately,
and when what it missed will have been delivered.

``with_parked_stats`` serves the API's endpoint objects and the portal; ``answer_stats`` and
``catch_up`` the portal's list and page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from peewee import fn

from webhooks.config import Settings
from webhooks.health import probes
from webhooks.storage import endpoint_windows
from webhooks.storage.ids import id_floor
from webhooks.storage.models import Attempt, Delivery, Endpoint
from webhooks.storage.statuses import DeliveryStatus
from webhooks.storage.timeutil import to_naive_utc

#: Ids count milliseconds from here (naive UTC, as the database keeps times).
EPOCH = datetime(1970, 1, 1)


def with_parked_stats(endpoints: list[Endpoint], settings: Settings) -> list[Endpoint]:
    """Attach ``parked_count``, ``oldest_parked_at``, ``concurrency`` (a query each for all) and
    ``probe_due_at`` to each endpoint."""
    stats = {
        row.endpoint_id: (row.count, row.oldest)
        for row in Delivery.select(
            Delivery.endpoint, fn.COUNT(Delivery.id).alias("count"), fn.MIN(Delivery.created_at).alias("oldest")
        )
        .where(Delivery.endpoint.in_([e.id for e in endpoints]) & (Delivery.status == DeliveryStatus.PARKED))
        .group_by(Delivery.endpoint)
    } if endpoints else {}
    windows = endpoint_windows.of_endpoints([e.id for e in endpoints])
    ceiling = settings.endpoint_max_in_flight
    for endpoint in endpoints:
        endpoint.parked_count, endpoint.oldest_parked_at = stats.get(endpoint.id, (0, None))
        endpoint.probe_due_at = probes.due_at(endpoint, settings.probe_interval)
        # No worker is calling it now: no window to show (its next calls start from a small one).
        endpoint.concurrency = windows.get(endpoint.id) or {"window": None, "ceiling": ceiling, "in_flight": 0}
    return endpoints


#: At most this many of an endpoint's latest attempts make its figures: an endpoint called a
#: million times a day is described by its latest calls, at the cost of a page of them.
SAMPLE = 1_000


@dataclass(frozen=True)
class AnswerStats:
    """An endpoint's latest attempts within a window (at most ``SAMPLE``): how many, how many
    delivered, median and p95 latency; ``sampled`` when the window held more."""

    attempts: int = 0
    delivered: int = 0
    p50_ms: float | None = None
    p95_ms: float | None = None
    sampled: bool = False

    @property
    def success_rate(self) -> float | None:
        return self.delivered / self.attempts if self.attempts else None


def _of(rows: list[tuple[float, str]]) -> AnswerStats:
    durations = sorted(duration for duration, _ in rows)
    count = len(durations)
    return AnswerStats(count, sum(1 for _, outcome in rows if outcome == DeliveryStatus.DELIVERED),
                       durations[count // 2], durations[min(count - 1, int(count * 0.95))], count >= SAMPLE)


def answer_stats(endpoint_ids: list[str], since: datetime) -> dict[str, AnswerStats]:
    """Each endpoint's latest attempts since ``since`` (ids are time-ordered, so the ``(endpoint, id)``
    index reads them newest first and stops after ``SAMPLE``)."""
    floor = id_floor("att", math.floor((to_naive_utc(since) - EPOCH).total_seconds() * 1000))
    stats = {}
    for endpoint_id in endpoint_ids:
        rows = list(Attempt.select(Attempt.duration_ms, Attempt.outcome)
                    .where((Attempt.endpoint == endpoint_id) & (Attempt.id >= floor))
                    .order_by(Attempt.id.desc()).limit(SAMPLE).tuples())
        if rows:
            stats[endpoint_id] = _of(rows)
    return stats


def catch_up(parked: int, release_rate: float, p50_ms: float | None) -> timedelta | None:
    """How long releasing ``parked`` deliveries takes once it runs: one at a time, each after the
    previous one's attempt (its median latency) and at most ``RELEASE_RATE`` a second."""
    if not parked:
        return None
    each = max(1 / release_rate, (p50_ms or 0) / 1000)
    return timedelta(seconds=math.ceil(parked * each))
