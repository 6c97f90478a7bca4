"""Numbers behind the overview and endpoint pages: status counts, hourly success and latency, causes."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import peewee
import pika
import pika.exceptions

from webhooks.errors import BrokerError
from webhooks.messaging.brokers import connect
from webhooks.console.formatting import cause_detail, cause_label
from webhooks.console.queries import UNDELIVERED
from webhooks.storage.models import Attempt, Delivery, Endpoint, Tenant
from webhooks.messaging.topology import Topology
from webhooks.storage.statuses import DeliveryStatus

#: How long the overview waits for the broker before it says "broker unavailable" (s).
BROKER_TIMEOUT = 1.0


@dataclass(frozen=True)
class HourStat:
    """Attempts of one hour: how many, how many succeeded, median and 95th percentile latency."""

    start: datetime
    total: int = 0
    succeeded: int = 0
    p50_ms: float | None = None
    p95_ms: float | None = None

    @property
    def success_rate(self) -> float | None:
        return self.succeeded / self.total if self.total else None


def hourly(samples: Iterable[tuple[datetime, float, bool]], now: datetime, hours: int = 24) -> list[HourStat]:
    """Bucket ``(started_at, duration_ms, succeeded)`` samples into the last ``hours`` whole hours (oldest first)."""
    end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    start = end - timedelta(hours=hours)
    buckets: list[list[tuple[float, bool]]] = [[] for _ in range(hours)]
    for started_at, duration_ms, succeeded in samples:
        if start <= started_at < end:
            buckets[int((started_at - start).total_seconds() // 3600)].append((duration_ms, succeeded))
    stats = []
    for index, bucket in enumerate(buckets):
        hour = start + timedelta(hours=index)
        if not bucket:
            stats.append(HourStat(hour))
            continue
        durations = sorted(duration for duration, _ in bucket)
        stats.append(
            HourStat(
                hour,
                total=len(bucket),
                succeeded=sum(1 for _, ok in bucket if ok),
                p50_ms=statistics.median(durations),
                p95_ms=durations[min(len(durations) - 1, int(len(durations) * 0.95))],
            )
        )
    return stats


def endpoint_hourly(endpoint_id: str, now: datetime) -> list[HourStat]:
    """The last 24 hours of attempts to one endpoint, per hour."""
    rows = (
        Attempt.select(Attempt.started_at, Attempt.duration_ms, Attempt.outcome)
        .where((Attempt.endpoint == endpoint_id) & (Attempt.started_at >= now - timedelta(hours=25)))
        .tuples()
    )
    return hourly(((started, duration, outcome == DeliveryStatus.DELIVERED) for started, duration, outcome in rows), now)


@dataclass(frozen=True)
class Cause:
    """Failed attempts that share a cause (error class or HTTP status); ``sample_error`` the latest
    one's error text where it says more than ``label``."""

    label: str
    count: int
    last_seen: datetime
    sample_error: str | None
    sample_delivery_id: str
    sample_event_id: str


def failure_causes(endpoint_id: str, since: datetime) -> list[Cause]:
    """Failed attempts of ``endpoint_id`` since ``since``, grouped by cause, most frequent first."""
    failed = (Attempt.endpoint == endpoint_id) & (Attempt.started_at >= since) & (Attempt.outcome != DeliveryStatus.DELIVERED)
    groups = (
        Attempt.select(Attempt.error_class, Attempt.response_status, peewee.fn.COUNT(Attempt.id).alias("n"))
        .where(failed)
        .group_by(Attempt.error_class, Attempt.response_status)
        .tuples()
    )
    causes: dict[str, Cause] = {}
    for error_class, status, count in groups:
        latest = (
            Attempt.select()
            .where(failed & _is(Attempt.error_class, error_class) & _is(Attempt.response_status, status))
            .order_by(Attempt.id.desc())
            .first()
        )
        label = cause_label(error_class, status)
        detail = cause_detail(latest.error, status)
        cause = Cause(label, count, latest.started_at, detail, latest.delivery_id, latest.event_id)
        if label in causes:  # e.g. a timeout with and without a status: one cause
            newer = max(causes[label], cause, key=lambda item: item.last_seen)
            cause = replace(newer, count=causes[label].count + count)
        causes[label] = cause
    return sorted(causes.values(), key=lambda cause: (-cause.count, cause.label))


def _is(column: peewee.Field, value: object) -> peewee.Expression:
    return column.is_null() if value is None else column == value


def status_counts(*conditions: peewee.Expression) -> dict[str, int]:
    """Deliveries per status matching every condition."""
    query = Delivery.select(Delivery.status, peewee.fn.COUNT(Delivery.id)).group_by(Delivery.status)
    for condition in conditions:
        query = query.where(condition)
    return dict(query.tuples())


def unhealthy_endpoints(limit: int = 20) -> list[Endpoint]:
    """Endpoints (not deleted) that are offline, recovering or disabled."""
    return list(
        Endpoint.select(Endpoint, Tenant)
        .join(Tenant)
        .where(Endpoint.deleted_at.is_null() & ((Endpoint.health != "online") | Endpoint.disabled))
        .order_by(Endpoint.offline_since.desc(nulls="LAST"), Endpoint.id)
        .limit(limit)
    )


def oldest_undelivered() -> Delivery | None:
    """The delivery that has waited longest for a successful attempt."""
    return (
        Delivery.select()
        .where(Delivery.status.in_(UNDELIVERED))
        .order_by(Delivery.created_at, Delivery.id)
        .first()
    )


def queue_depths(amqp_url: str, topology: Topology) -> dict[str, int]:
    """Messages ready in each queue; raises ``DepthsUnavailable`` with the reason when they cannot be read."""
    try:
        connection = connect(amqp_url, BROKER_TIMEOUT)
    except (pika.exceptions.AMQPError, OSError) as error:
        raise DepthsUnavailable(f"broker unavailable ({type(error).__name__})") from error
    try:
        return topology.depths(connection.channel())
    except pika.exceptions.ChannelClosedByBroker as error:
        raise DepthsUnavailable(f"a queue is missing: run rabbit_setup.py ({error.reply_text})") from error
    except (pika.exceptions.AMQPError, OSError) as error:
        raise DepthsUnavailable(f"broker unavailable ({type(error).__name__})") from error
    finally:
        if connection.is_open:
            connection.close()


class DepthsUnavailable(BrokerError):
    """Queue depths could not be read."""
