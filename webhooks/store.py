"""The worker's database side: claim an attempt, record it, cancel or park a delivery.

The claim (decision 1) makes every attempt happen once per delivery: a message whose
attempt number is no longer the next one is stale and dropped, so redeliveries, relay
races and resends never start a second retry chain. The claim is a lease, so a worker
killed mid-attempt does not hold the delivery forever.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import peewee
from peewee import fn

from webhooks import presence
from webhooks.db import durable_commit, locking, relaxed_commit, retrying, write
from webhooks.endpoint_view import EndpointView
from webhooks.event_types import OPERATIONAL_EVENT_TYPES
from webhooks.messages import DeliveryMessage
from webhooks.models import Attempt, Delivery, Endpoint
from webhooks.timeutil import utcnow

#: Statuses a ladder attempt may act on.
LADDER_STATUSES = ("pending", "retrying")

#: Statuses a person's resend or recover may act on (not cancelled).
MANUAL_STATUSES = ("pending", "retrying", "failed", "delivered", "parked")

#: Statuses that still wait for an attempt (deleting the endpoint cancels them).
UNFINISHED_STATUSES = ("pending", "retrying", "parked")

#: When the endpoint is at its in-flight cap, look again this soon (seconds).
IN_FLIGHT_RECHECK_SECONDS = 0.02


class ClaimState(enum.Enum):
    CLAIMED = "claimed"
    #: The attempt was made already (or the delivery is finished): drop the message.
    STALE = "stale"
    #: Another worker holds the attempt right now: try again shortly.
    BUSY = "busy"
    #: The endpoint is at its in-flight cap or rate limit: try again after ``wait`` seconds.
    THROTTLED = "throttled"
    #: The endpoint is disabled, or offline and this is not its probe: the delivery parked.
    PARKED = "parked"
    #: The endpoint was deleted: the delivery was cancelled.
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class Claim:
    state: ClaimState
    prior_status: str | None = None
    endpoint: EndpointView | None = None
    #: Seconds to wait before trying again (THROTTLED).
    wait: float = 0.0


@dataclass(frozen=True)
class Limits:
    """Per-endpoint limits, global across worker processes (decision 13)."""

    max_in_flight: int
    lease_seconds: float


def _tokens(endpoint: Endpoint, now: datetime) -> float:
    """Tokens in the endpoint's rate bucket now (refilled at ``rate_limit`` per second, at most that many)."""
    rate = float(endpoint.rate_limit)
    tokens = rate if endpoint.rate_tokens is None else endpoint.rate_tokens
    if endpoint.rate_updated_at is not None:
        tokens = min(rate, tokens + (now - endpoint.rate_updated_at).total_seconds() * rate)
    return tokens


@retrying
def claim(message: DeliveryMessage, limits: Limits) -> Claim:
    """Take attempt ``message.attempt`` of its delivery, if its endpoint may be called now.

    The endpoint row is locked for the decision, so the in-flight cap (live leases of
    its deliveries) and the rate bucket hold across every worker process. The lock is
    held for three round trips: read (and lock), take the lease, commit.
    """
    allowed = LADDER_STATUSES if message.trigger == "ladder" else MANUAL_STATUSES
    now = utcnow()
    with write():
        # Usually only a lease is written: lost in a server crash, the attempt is merely
        # made again. Parking and cancelling switch durability back on (the message is
        # acked after them).
        relaxed_commit()
        query = (
            Delivery.select(Delivery.status, Delivery.attempts, Delivery.lease_until, Endpoint)
            .join(Endpoint)
            .where(Delivery.id == message.delivery_id)
        )
        row = locking(query, of=Endpoint).first()
        if row is None or row.attempts != message.attempt - 1 or row.status not in allowed:
            return Claim(ClaimState.STALE, None if row is None else row.status)
        endpoint = row.endpoint
        if endpoint.deleted_at is not None:
            durable_commit()
            _set_status(message, "cancelled", UNFINISHED_STATUSES)
            return Claim(ClaimState.CANCELLED, row.status)
        parks = endpoint.disabled or (
            message.trigger == "ladder"
            and endpoint.health == presence.OFFLINE
            and endpoint.probe_delivery_id != message.delivery_id
        )
        if parks:
            durable_commit()
            _set_status(message, "parked", LADDER_STATUSES)
            return Claim(ClaimState.PARKED, row.status)
        if row.lease_until is not None and row.lease_until > now:
            return Claim(ClaimState.BUSY, row.status)
        tokens = _tokens(endpoint, now) if endpoint.rate_limit else None
        if tokens is not None and tokens < 1.0:
            return Claim(ClaimState.THROTTLED, row.status, wait=(1.0 - tokens) / endpoint.rate_limit)
        others = Delivery.alias()
        in_flight = others.select(fn.COUNT(others.id)).where((others.endpoint == endpoint.id) & (others.lease_until > now))
        taken = (
            Delivery.update(lease_until=now + timedelta(seconds=limits.lease_seconds))
            .where(
                (Delivery.id == message.delivery_id)
                & (Delivery.attempts == message.attempt - 1)
                & (in_flight < limits.max_in_flight)
            )
            .execute()
        )
        if not taken:
            return Claim(ClaimState.THROTTLED, row.status, wait=IN_FLIGHT_RECHECK_SECONDS)
        if tokens is not None:
            Endpoint.update(rate_tokens=tokens - 1.0, rate_updated_at=now).where(Endpoint.id == endpoint.id).execute()
        return Claim(ClaimState.CLAIMED, row.status, EndpointView.of(endpoint))


@retrying
def release(message: DeliveryMessage) -> None:
    """Give the claim back without an attempt (the call could not even start)."""
    (
        Delivery.update(lease_until=None)
        .where((Delivery.id == message.delivery_id) & (Delivery.attempts == message.attempt - 1))
        .execute()
    )


@dataclass(frozen=True)
class Outcome:
    """What to write for one finished attempt."""

    attempt_id: str
    status: str
    next_attempt_at: datetime | None
    #: Attempt-row columns: started_at, duration_ms, url, request_headers, response_*, error*.
    attempt_fields: dict[str, Any]
    last_status_code: int | None
    last_error: str | None
    #: False for a 429: the endpoint is up, only busy (it does not count towards offline).
    counts_as_failure: bool = True
    #: Set when the endpoint must be disabled (410 Gone, ``webhook-delivery: disable``).
    disable_reason: str | None = None
    #: The ladder ran out: raise a ``delivery.exhausted`` alert.
    exhausted: bool = False


@retrying
def record(message: DeliveryMessage, outcome: Outcome, offline_after: int) -> bool:
    """Write the attempt, the delivery's new state and the endpoint's presence together.

    Returns False if another worker recorded this attempt already.
    """
    now = utcnow()
    try:
        with write():
            endpoint = Endpoint.select().where(Endpoint.id == message.endpoint_id).first()
            touches_endpoint = endpoint is not None and presence.needs_update(endpoint, outcome.status == "delivered", now)
            if touches_endpoint or outcome.disable_reason:
                # Lock it before anything else, as ``claim`` does: one lock order, no deadlock.
                # A plain success of a healthy endpoint writes nothing to it, so deliveries
                # to one endpoint do not queue on its row.
                endpoint = locking(Endpoint.select().where(Endpoint.id == message.endpoint_id)).first()
            Attempt.insert(
                id=outcome.attempt_id,
                delivery=message.delivery_id,
                tenant=message.tenant_id,
                event=message.event_id,
                endpoint=message.endpoint_id,
                attempt_no=message.attempt,
                trigger=message.trigger,
                outcome=outcome.status,
                next_attempt_at=outcome.next_attempt_at,
                **outcome.attempt_fields,
            ).execute()
            updated = (
                Delivery.update(
                    attempts=message.attempt,
                    status=outcome.status,
                    next_attempt_at=outcome.next_attempt_at,
                    last_status_code=outcome.last_status_code,
                    last_error=outcome.last_error,
                    lease_until=None,
                    # The outbox mark: the next attempt's message is not confirmed yet.
                    enqueued_at=None,
                    updated_at=now,
                    delivered_at=now if outcome.status == "delivered" else Delivery.delivered_at,
                )
                .where((Delivery.id == message.delivery_id) & (Delivery.attempts == message.attempt - 1))
                .execute()
            )
            if not updated:
                raise peewee.IntegrityError("attempt already recorded")
            if endpoint is not None:
                _update_presence(endpoint, message, outcome, offline_after, now, touches_endpoint)
        return True
    except peewee.IntegrityError:
        # Either another worker recorded this attempt, or our own commit went through and
        # only its acknowledgement was lost with the connection: tell them apart by id.
        return Attempt.get_or_none(Attempt.id == outcome.attempt_id) is not None


def _update_presence(
    endpoint: Endpoint, message: DeliveryMessage, outcome: Outcome, offline_after: int, now: datetime, touches: bool
) -> None:
    if outcome.status == "delivered" and touches:
        presence.record_success(endpoint, now)
    if outcome.disable_reason:
        presence.disable(Endpoint.get_by_id(endpoint.id), outcome.disable_reason, now)
    elif outcome.status != "delivered":
        summary = outcome.last_error or "failed"
        presence.record_failure(endpoint, message.delivery_id, summary, outcome.counts_as_failure, offline_after, now)
    if outcome.exhausted and message.event_type not in OPERATIONAL_EVENT_TYPES:
        # Never about an operational event: alerts do not raise alerts.
        presence.raise_alert(
            endpoint, "delivery.exhausted", outcome.last_error or "failed", now,
            delivery_id=message.delivery_id, event_id=message.event_id,
            event_type=message.event_type, attempts=message.attempt, last_error=outcome.last_error,
        )


def _set_status(message: DeliveryMessage, status: str, statuses: tuple[str, ...]) -> None:
    (
        Delivery.update(status=status, next_attempt_at=None, lease_until=None, updated_at=utcnow())
        .where((Delivery.id == message.delivery_id) & Delivery.status.in_(statuses))
        .execute()
    )
