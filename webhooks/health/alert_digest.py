"""The digest in an alert email: what is waiting for an endpoint, from two aggregate queries."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

import peewee

from webhooks.storage.models import Delivery
from webhooks.storage.timeutil import utcnow
from webhooks.storage.statuses import DeliveryStatus

#: Deliveries that are waiting on the endpoint (or on a person, for ``failed``).
WAITING_STATUSES = (DeliveryStatus.PARKED, DeliveryStatus.RETRYING, DeliveryStatus.FAILED)

#: At most this many distinct failure causes in a digest, most recent first.
MAX_CAUSES = 10


@dataclass(frozen=True)
class FailureCause:
    error: str
    #: Waiting deliveries whose last attempt failed this way.
    count: int
    last_seen: datetime


@dataclass(frozen=True)
class Digest:
    """What is waiting for one endpoint when the email is written."""

    parked: int = 0
    retrying: int = 0
    failed: int = 0
    oldest_parked_age: timedelta | None = None
    causes: tuple[FailureCause, ...] = ()


def digest_for(endpoint_id: str | None) -> Digest:
    """Counts by status, the oldest parked delivery's age and recent causes: two GROUP BY queries."""
    if endpoint_id is None:
        return Digest()
    # The endpoint's own deliveries: a fallback copy is news sent elsewhere, not something the endpoint owes.
    waiting = (Delivery.endpoint == endpoint_id) & Delivery.status.in_(WAITING_STATUSES) & ~Delivery.fallback
    counts: dict[str, int] = {}
    oldest_parked: datetime | None = None
    by_status = cast(
        "Iterable[tuple[str, int, datetime]]",
        Delivery.select(Delivery.status, peewee.fn.COUNT(Delivery.id), peewee.fn.MIN(Delivery.created_at))
        .where(waiting)
        .group_by(Delivery.status)
        .tuples(),
    )
    for status, count, oldest in by_status:
        counts[status] = count
        if status == DeliveryStatus.PARKED:
            oldest_parked = oldest
    last_seen = peewee.fn.MAX(Delivery.updated_at)
    causes = cast(
        "Iterable[tuple[str, int, datetime]]",
        Delivery.select(Delivery.last_error, peewee.fn.COUNT(Delivery.id), last_seen)
        .where(waiting & Delivery.last_error.is_null(False))
        .group_by(Delivery.last_error)
        .order_by(last_seen.desc())
        .limit(MAX_CAUSES)
        .tuples(),
    )
    return Digest(
        parked=counts.get(DeliveryStatus.PARKED, 0),
        retrying=counts.get(DeliveryStatus.RETRYING, 0),
        failed=counts.get(DeliveryStatus.FAILED, 0),
        oldest_parked_age=None if oldest_parked is None else max(utcnow() - oldest_parked, timedelta(0)),
        causes=tuple(FailureCause(error, count, seen) for error, count, seen in causes),
    )
