"""Accepting an event: one transaction (event, seq, deliveries, idempotency key), then publish.

The per-tenant ``seq`` is bumped with ``UPDATE … RETURNING`` inside the transaction, so
the tenant row is locked until commit and ``seq`` order is commit order: a reader of
``after=n`` can never miss a smaller seq committed later.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import peewee
from flask import current_app

from webhooks import metrics, presence
from webhooks.db import retrying, write
from webhooks.event_types import OPERATIONAL_EVENT_TYPES, wants
from webhooks.ids import new_id
from webhooks.models import Delivery, Endpoint, Event, IdempotencyKey, Tenant
from webhooks.outbox import enqueue, message_for
from webhooks.publisher import Publisher
from webhooks.timeutil import utcnow
from webhooks.topology import Topology

log = logging.getLogger(__name__)

#: How long an idempotency key is remembered.
IDEMPOTENCY_TTL = timedelta(hours=24)


class IdempotencyConflict(Exception):
    """The idempotency key was used before with a different request."""


class ReservedEventType(ValueError):
    """Operational event types are raised by the service only."""


class RateLimited(Exception):
    """The tenant sends events faster than ``INGEST_RATE_LIMIT``; nothing was written."""

    def __init__(self, retry_after: float) -> None:
        super().__init__(f"too many events: at most the tenant's rate limit per second; retry in {retry_after:.2f}s")
        self.retry_after = retry_after


@dataclass
class Accepted:
    event: Event
    deliveries: list[Delivery]
    #: True when the key was seen before: the same event is returned, nothing created.
    replayed: bool


def request_hash(event_type: str, payload: dict[str, Any]) -> str:
    """Fingerprint of a request, to tell a retry from a different request with the same key."""
    canonical = json.dumps({"event_type": event_type, "payload": payload}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _replay(tenant: Tenant, key: str, digest: str) -> Accepted | None:
    row = (
        IdempotencyKey.select()
        .where((IdempotencyKey.tenant == tenant) & (IdempotencyKey.key == key))
        .first()
    )
    if row is None:
        return None
    if row.created_at < utcnow() - IDEMPOTENCY_TTL:
        row.delete_instance()  # expired: the key may be used afresh
        return None
    if row.request_hash != digest:
        raise IdempotencyConflict(f"idempotency key {key!r} was already used with a different request")
    event = Event.get_by_id(row.event_id)
    deliveries = list(Delivery.select().where(Delivery.event == event).order_by(Delivery.id))
    return Accepted(event, deliveries, replayed=True)


def parks(endpoint: Endpoint) -> bool:
    """New deliveries to a disabled, offline or recovering endpoint wait, parked, in order."""
    return endpoint.disabled or endpoint.health in presence.PARKING_STATES


def _next_seq(tenant: Tenant, rate_limit: float | None, now: datetime) -> int:
    """Bump the tenant's ``seq`` (locking its row until commit) and spend an ingest token."""
    (row,) = list(
        Tenant.update(event_seq=Tenant.event_seq + 1)
        .where(Tenant.id == tenant.id)
        .returning(Tenant.event_seq, Tenant.ingest_tokens, Tenant.ingest_updated_at)
        .execute()
    )
    if rate_limit is not None:
        # Burst of one second's worth; refilled continuously.
        tokens = rate_limit if row.ingest_tokens is None else row.ingest_tokens
        if row.ingest_updated_at is not None:
            tokens = min(rate_limit, tokens + (now - row.ingest_updated_at).total_seconds() * rate_limit)
        if tokens < 1.0:
            raise RateLimited((1.0 - tokens) / rate_limit)
        Tenant.update(ingest_tokens=tokens - 1.0, ingest_updated_at=now).where(Tenant.id == tenant.id).execute()
    return int(row.event_seq)


@retrying
def store_event(
    tenant: Tenant,
    event_type: str,
    payload: dict[str, Any],
    key: str | None,
    *,
    exclude_endpoint: str | None = None,
    rate_limit: float | None = None,
) -> Accepted:
    """Write the event and its deliveries in one transaction (or return the key's earlier event).

    ``exclude_endpoint``: an operational event is not sent to the endpoint it is about.
    ``rate_limit``: events per second this tenant may send (None: unlimited).
    """
    digest = request_hash(event_type, payload)
    try:
        with write():
            if key is not None:
                earlier = _replay(tenant, key, digest)
                if earlier is not None:
                    return earlier
            now = utcnow()
            seq = _next_seq(tenant, rate_limit, now)
            event = Event.create(
                id=new_id("evt"), tenant=tenant, seq=seq, event_type=event_type, payload=payload, created_at=now
            )
            if key is not None:
                IdempotencyKey.create(tenant=tenant, key=key, event=event, request_hash=digest, created_at=now)
            endpoints = Endpoint.select().where((Endpoint.tenant == tenant) & Endpoint.deleted_at.is_null())
            deliveries = [
                Delivery(
                    id=new_id("dlv"),
                    tenant=tenant.id,
                    event=event.id,
                    endpoint=endpoint.id,
                    status="parked" if parks(endpoint) else "pending",
                    next_attempt_at=None if parks(endpoint) else now,
                    created_at=now,
                    updated_at=now,
                )
                for endpoint in endpoints.order_by(Endpoint.id)
                if wants(endpoint.event_types, event_type) and endpoint.id != exclude_endpoint
            ]
            if deliveries:
                Delivery.bulk_create(deliveries)
            return Accepted(event, deliveries, replayed=False)
    except peewee.IntegrityError:
        # Lost a race for the same idempotency key: the winner has committed; return it.
        if key is None:
            raise
        with write():
            winner = _replay(tenant, key, digest)
        if winner is None:
            raise
        return winner


def accept_event(
    tenant: Tenant,
    event_type: str,
    payload: dict[str, Any],
    idempotency_key: str | None = None,
    *,
    publisher: Publisher | None = None,
    topology: Topology | None = None,
) -> Accepted:
    """Store the event durably, then publish its deliveries (after the answer, in a request;
    the relay covers whatever is not confirmed)."""
    if event_type in OPERATIONAL_EVENT_TYPES:
        raise ReservedEventType(f"{event_type!r} is reserved for events the service raises itself")
    in_request = publisher is None
    publisher, topology, rate_limit = request_defaults(publisher, topology)
    accepted = store_event(tenant, event_type, payload, idempotency_key, rate_limit=rate_limit)
    if not accepted.replayed:
        messages = [message_for(d, accepted.event) for d in accepted.deliveries if d.status == "pending"]
        if in_request:
            # The answer does not wait for the broker: published right after, in batches.
            current_app.extensions["webhooks.enqueuer"].submit(messages)
        else:
            enqueue(publisher, topology, messages)
        metrics.EVENTS.inc()
        log.info(
            "accepted event=%s tenant=%s type=%s seq=%d deliveries=%d",
            accepted.event.id, tenant.id, event_type, accepted.event.seq, len(accepted.deliveries),
        )
    return accepted


def request_defaults(publisher: Publisher | None, topology: Topology | None) -> tuple[Publisher, Topology, float | None]:
    """The app's publisher, topology and ingest rate limit (outside a request: as given, unlimited)."""
    if publisher is not None and topology is not None:
        return publisher, topology, None
    settings = current_app.extensions["webhooks.settings"]
    return (
        publisher or current_app.extensions["webhooks.publisher"],
        topology or settings.topology,
        settings.ingest_rate_limit,
    )
