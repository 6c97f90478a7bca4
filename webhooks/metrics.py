"""Prometheus metrics: counters from every process, gauges read at scrape time.

With ``PROMETHEUS_MULTIPROC_DIR`` set (``./dev run`` sets it and wipes it at start)
web and worker processes write their counters there and ``/metrics`` aggregates them
(prometheus-client's multiprocess mode). Queue depths, parked deliveries, the oldest
undelivered delivery and endpoints by health are read when scraped. No per-endpoint
or per-tenant labels: their number is unbounded.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
from typing import Iterator

from flask import Blueprint, Response, abort, current_app, request
from peewee import fn
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector

from webhooks.storage import endpoint_windows
from webhooks.messaging.brokers import connect
from webhooks.storage.models import Delivery, Endpoint
from webhooks.storage.timeutil import utcnow
from webhooks.storage.statuses import DeliveryStatus

log = logging.getLogger(__name__)

DELIVERIES = Counter("webhooks_deliveries", "Attempts recorded, by the delivery's resulting status", ["outcome"])
ATTEMPTS = Counter("webhooks_attempts", "Attempts by status class (2xx…5xx, accepted by a destination without HTTP statuses, or error)", ["status_class"])
ATTEMPT_SECONDS = Histogram(
    "webhooks_attempt_duration_seconds",
    "Duration of an attempt, request to response",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30),
)
EVENTS = Counter("webhooks_events_ingested", "Events accepted by POST /v1/events (replays not counted)")
API_REFUSED = Counter(
    "webhooks_api_refused", "API requests answered 429, by the limit they met (ingest_rate: INGEST_RATE_LIMIT; "
    "waiting_requests: TENANT_MAX_WAITING_REQUESTS)", ["limit"],
)
WINDOW_CUTS = Counter(
    "webhooks_window_cuts", "Cuts of an endpoint's concurrency window, by cause (failure: timeout, error, 5xx, 429; "
    "latency: answers far slower than its baseline)", ["cause"],
)

REPUBLISHED = Counter(
    "webhooks_republished", "Deliveries published again by the clock's sweeper: overdue, held by no worker, "
    "their message lost or held out of reach (a lost broker node's waiting tier)",
)

TRACE_SPANS_DROPPED = Counter(
    "webhooks_trace_spans_dropped", "Trace spans that never reached the OTLP collector, by reason (queue_full: the "
    "export queue was full; export_failed: the collector did not take them)", ["reason"],
)

#: Bucket bounds of ``webhooks_endpoint_windows`` (endpoints whose window is at most this).
WINDOW_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)

#: Environment variable holding a bearer token for ``/metrics``; without it only loopback may scrape.
TOKEN_ENV = "METRICS_TOKEN"

#: Headers a proxy adds for the client it forwards: such a request is not the loopback peer's own.
FORWARDING_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Real-IP")

blueprint = Blueprint("metrics", __name__)


def spans_dropped(reason: str, spans: int) -> None:
    """Count trace spans that never reached the collector (``tracing.configure``'s ``count_dropped``)."""
    TRACE_SPANS_DROPPED.labels(reason).inc(spans)


def observe_attempt(status_code: int | None, error_class: str | None, seconds: float, outcome: str) -> None:
    """Count one recorded attempt (called by the worker): by status class, ``error`` when no answer
    came, ``accepted`` when a destination without HTTP statuses (a Redis stream) took it."""
    DELIVERIES.labels(outcome).inc()
    if status_code is not None:
        ATTEMPTS.labels(f"{status_code // 100}xx").inc()
    else:
        ATTEMPTS.labels("accepted" if error_class is None else "error").inc()
    ATTEMPT_SECONDS.observe(seconds)


class StateCollector:
    """Gauges computed when Prometheus scrapes: the broker's queues and the database's state."""

    def __init__(self, settings: object) -> None:
        self.settings = settings

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield from self._queues()
        parked = GaugeMetricFamily("webhooks_parked_deliveries", "Deliveries parked for an offline or disabled endpoint")
        parked.add_metric([], Delivery.select().where(Delivery.status == DeliveryStatus.PARKED).count())
        yield parked
        oldest = Delivery.select(fn.MIN(Delivery.created_at)).where(Delivery.status.in_((DeliveryStatus.PENDING, DeliveryStatus.RETRYING))).scalar()
        age = GaugeMetricFamily("webhooks_oldest_undelivered_seconds", "Age of the oldest pending or retrying delivery")
        age.add_metric([], 0.0 if oldest is None else (utcnow() - oldest).total_seconds())
        yield age
        health = GaugeMetricFamily("webhooks_endpoints", "Endpoints by health", labels=["health"])
        counts = {"online": 0, "offline": 0, "recovering": 0, "disabled": 0}
        live = Endpoint.select(Endpoint.health, Endpoint.disabled).where(Endpoint.deleted_at.is_null())
        for row in live:
            state = "disabled" if row.disabled else row.health
            counts[state] = counts.get(state, 0) + 1
        for state, count in counts.items():
            health.add_metric([state], count)
        yield health
        yield _windows()

    def _queues(self) -> Iterator[GaugeMetricFamily]:
        depth = GaugeMetricFamily("webhooks_queue_messages", "Messages ready in each queue", labels=["queue"])
        up = GaugeMetricFamily("webhooks_broker_up", "1 if the broker answered this scrape")
        try:
            connection = connect(self.settings.amqp_url, 1.0)  # type: ignore[attr-defined]
            try:
                for queue, count in self.settings.topology.depths(connection.channel()).items():  # type: ignore[attr-defined]
                    depth.add_metric([queue], count)
            finally:
                connection.close()
            up.add_metric([], 1)
        except Exception as error:  # noqa: BLE001 - a scrape reports the broker down, it does not fail
            log.warning("metrics: broker unavailable: %s", error)
            up.add_metric([], 0)
        yield depth
        yield up


def _windows() -> GaugeMetricFamily:
    """Endpoints being called now by their concurrency window, as cumulative buckets (no per-endpoint labels)."""
    windows = endpoint_windows.all_windows()
    family = GaugeMetricFamily(
        "webhooks_endpoint_windows", "Endpoints being called now whose concurrency window is at most `le`", labels=["le"]
    )
    for bound in WINDOW_BUCKETS:
        family.add_metric([str(bound)], sum(1 for window in windows if window <= bound))
    family.add_metric(["+Inf"], len(windows))
    return family


def _allowed() -> bool:
    """With ``METRICS_TOKEN``: the bearer token, compared in constant time (a plain ``==`` stops at
    the first differing byte, and its timing tells how much of a guess was right). Without it:
    a loopback peer whose request names no client it forwards for, since a proxy on this host
    connects from loopback on behalf of anyone (only a proxy that adds such a header is caught
    this way: the docs say to set the token behind a proxy)."""
    token = os.environ.get(TOKEN_ENV)
    if token:
        presented = request.headers.get("Authorization", "").encode()
        return hmac.compare_digest(presented, f"Bearer {token}".encode())
    if any(name in request.headers for name in FORWARDING_HEADERS):
        return False
    return ipaddress.ip_address(request.remote_addr or "0.0.0.0").is_loopback


@blueprint.get("/metrics")
def metrics() -> Response:
    """Prometheus exposition; loopback only unless ``METRICS_TOKEN`` is set."""
    if not _allowed():
        abort(403)
    registry = CollectorRegistry()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        MultiProcessCollector(registry)
    else:
        from prometheus_client import REGISTRY

        registry = REGISTRY
    output = generate_latest(registry)
    state = CollectorRegistry()
    state.register(StateCollector(current_app.extensions["webhooks.settings"]))
    return Response(output + generate_latest(state), mimetype=CONTENT_TYPE_LATEST)


def child_exit(server: object, worker: object) -> None:
    """gunicorn hook: drop a dead worker's live gauges from the multiprocess directory."""
    from prometheus_client import multiprocess

    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(worker.pid)  # type: ignore[attr-defined]
