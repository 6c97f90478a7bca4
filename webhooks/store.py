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

from webhooks.db import retrying, write
from webhooks.messages import DeliveryMessage
from webhooks.models import Attempt, Delivery, Endpoint
from webhooks.timeutil import utcnow

#: Statuses a ladder attempt may act on.
LADDER_STATUSES = ("pending", "retrying")

#: Statuses a person's resend or recover may act on (not cancelled).
MANUAL_STATUSES = ("pending", "retrying", "failed", "delivered", "parked")


class ClaimState(enum.Enum):
    CLAIMED = "claimed"
    #: The attempt was made already (or the delivery is finished): drop the message.
    STALE = "stale"
    #: Another worker holds the attempt right now: try again shortly.
    BUSY = "busy"


@dataclass(frozen=True)
class Claim:
    state: ClaimState
    prior_status: str | None = None


@retrying
def claim(message: DeliveryMessage, lease_seconds: float) -> Claim:
    """Take attempt ``message.attempt`` of its delivery for ``lease_seconds``."""
    allowed = LADDER_STATUSES if message.trigger == "ladder" else MANUAL_STATUSES
    now = utcnow()
    with write():
        row = (
            Delivery.select(Delivery.status, Delivery.attempts, Delivery.lease_until)
            .where(Delivery.id == message.delivery_id)
            .first()
        )
        if row is None or row.attempts != message.attempt - 1 or row.status not in allowed:
            return Claim(ClaimState.STALE, None if row is None else row.status)
        taken = (
            Delivery.update(lease_until=now + timedelta(seconds=lease_seconds))
            .where(
                (Delivery.id == message.delivery_id)
                & (Delivery.attempts == message.attempt - 1)
                & (Delivery.lease_until.is_null() | (Delivery.lease_until < now))
            )
            .execute()
        )
        return Claim(ClaimState.CLAIMED, row.status) if taken else Claim(ClaimState.BUSY, row.status)


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
    #: Set when the endpoint must be disabled (410 Gone), with the reason.
    disable_endpoint: str | None = None


@retrying
def record(message: DeliveryMessage, outcome: Outcome) -> bool:
    """Write the attempt and the delivery's new state together; False if another worker did."""
    now = utcnow()
    try:
        with write():
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
            if outcome.disable_endpoint:
                (
                    Endpoint.update(disabled=True, disabled_reason=outcome.disable_endpoint, updated_at=now)
                    .where(Endpoint.id == message.endpoint_id)
                    .execute()
                )
        return True
    except peewee.IntegrityError:
        # Either another worker recorded this attempt, or our own commit went through and
        # only its acknowledgement was lost with the connection: tell them apart by id.
        return Attempt.get_or_none(Attempt.id == outcome.attempt_id) is not None


def _set_status(message: DeliveryMessage, status: str, statuses: tuple[str, ...]) -> None:
    (
        Delivery.update(status=status, next_attempt_at=None, lease_until=None, updated_at=utcnow())
        .where((Delivery.id == message.delivery_id) & Delivery.status.in_(statuses))
        .execute()
    )


@retrying
def cancel(message: DeliveryMessage) -> None:
    """The endpoint was deleted: the delivery will never be attempted."""
    _set_status(message, "cancelled", ("pending", "retrying", "parked"))


@retrying
def park(message: DeliveryMessage) -> None:
    """The endpoint is disabled: keep the delivery, make no call, wait for it to be enabled."""
    _set_status(message, "parked", ("pending", "retrying"))
