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
from typing import Any, NamedTuple, Sequence

import peewee

from webhooks import presence, sqltext
from webhooks.db import database, durable_commit, relaxed_commit, retrying, write
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


def claim(message: DeliveryMessage, limits: Limits) -> Claim:
    """Take attempt ``message.attempt`` of its delivery, if its endpoint may be called now."""
    return claim_many([message], limits)[0]


@retrying
def claim_many(messages: Sequence[DeliveryMessage], limits: Limits) -> list[Claim]:
    """Claim each message's attempt, in one transaction (the worker's group commit).

    The endpoint rows are locked (in id order, so batches never deadlock) for the
    decision, so the in-flight cap (live leases of an endpoint's deliveries) and the
    rate bucket hold across every worker process. Messages are decided in the order
    given; a delivery that appears twice is claimed at most once.
    """
    now = utcnow()
    lease_until = now + timedelta(seconds=limits.lease_seconds)
    with write():
        # Usually only leases are written: lost in a server crash, an attempt is merely
        # made again. Parking and cancelling switch durability back on (the message is
        # acked after them).
        relaxed_commit()
        endpoints = {
            endpoint.id: endpoint
            for endpoint in sqltext.models_in(Endpoint, "id", sorted({m.endpoint_id for m in messages}), lock=True)
        }
        rows = {
            delivery_id: _DeliveryRow(status, attempts, held_until, endpoints[endpoint_id])
            for delivery_id, status, attempts, held_until, endpoint_id in sqltext.rows_in(
                Delivery, _CLAIM_COLUMNS, "id", sorted({m.delivery_id for m in messages})
            )
            if endpoint_id in endpoints
        }
        batch = _ClaimBatch(rows, limits, now)
        claims = [batch.decide(message) for message in messages]
        if batch.settled:
            durable_commit()
            for message, status, statuses in batch.settled:
                _set_status(message, status, statuses)
        if batch.leased:
            taken = _take_leases(batch.leased, lease_until)
            claims = [
                claim if claim.state is not ClaimState.CLAIMED or message.delivery_id in taken
                else Claim(ClaimState.STALE, claim.prior_status)
                for message, claim in zip(messages, claims)
            ]
        for endpoint_id, tokens in batch.tokens.items():
            Endpoint.update(rate_tokens=tokens, rate_updated_at=now).where(Endpoint.id == endpoint_id).execute()
    return claims


#: What a claim reads of each delivery.
_CLAIM_COLUMNS = ("id", "status", "attempts", "lease_until", "endpoint")


class _DeliveryRow(NamedTuple):
    status: str
    attempts: int
    lease_until: datetime | None
    endpoint: Endpoint


class _ClaimBatch:
    """The claim decisions of one transaction, with the endpoints' counts kept as they change."""

    def __init__(self, rows: dict[str, _DeliveryRow], limits: Limits, now: datetime) -> None:
        self.rows = rows
        self.limits = limits
        self.now = now
        self.in_flight = _live_leases({row.endpoint.id for row in rows.values()}, now)
        #: Rate buckets changed by this batch: endpoint id -> tokens left.
        self.tokens: dict[str, float] = {}
        self.leased: list[DeliveryMessage] = []
        #: Status changes to write: (message, new status, statuses it may change from).
        self.settled: list[tuple[DeliveryMessage, str, tuple[str, ...]]] = []
        self._decided: set[str] = set()

    def decide(self, message: DeliveryMessage) -> Claim:
        allowed = LADDER_STATUSES if message.trigger == "ladder" else MANUAL_STATUSES
        row = self.rows.get(message.delivery_id)
        if row is None or row.attempts != message.attempt - 1 or row.status not in allowed:
            return Claim(ClaimState.STALE, None if row is None else row.status)
        if message.delivery_id in self._decided:
            return Claim(ClaimState.BUSY, row.status)
        endpoint = row.endpoint
        if endpoint.deleted_at is not None:
            return self._settle(message, row.status, ClaimState.CANCELLED, UNFINISHED_STATUSES)
        parks = endpoint.disabled or (
            message.trigger == "ladder"
            and (
                (endpoint.health == presence.OFFLINE and endpoint.probe_delivery_id != message.delivery_id)
                # A retry from before the outage, back from a waiting tier while the parked
                # deliveries are released: it joins them, to arrive in creation order.
                or (endpoint.health == presence.RECOVERING and row.status == "retrying")
            )
        )
        if parks:
            return self._settle(message, row.status, ClaimState.PARKED, LADDER_STATUSES)
        if row.lease_until is not None and row.lease_until > self.now:
            return Claim(ClaimState.BUSY, row.status)
        tokens = None
        if endpoint.rate_limit:
            tokens = self.tokens.get(endpoint.id, _tokens(endpoint, self.now))
            if tokens < 1.0:
                return Claim(ClaimState.THROTTLED, row.status, wait=(1.0 - tokens) / endpoint.rate_limit)
        if self.in_flight.get(endpoint.id, 0) >= self.limits.max_in_flight:
            return Claim(ClaimState.THROTTLED, row.status, wait=IN_FLIGHT_RECHECK_SECONDS)
        self.in_flight[endpoint.id] = self.in_flight.get(endpoint.id, 0) + 1
        if tokens is not None:
            self.tokens[endpoint.id] = tokens - 1.0
        self.leased.append(message)
        self._decided.add(message.delivery_id)
        return Claim(ClaimState.CLAIMED, row.status, EndpointView.of(endpoint))

    def _settle(self, message: DeliveryMessage, prior: str, state: ClaimState, statuses: tuple[str, ...]) -> Claim:
        self.settled.append((message, state.value, statuses))
        self._decided.add(message.delivery_id)
        return Claim(state, prior)


def _live_leases(endpoint_ids: set[str], now: datetime) -> dict[str, int]:
    """Attempts in flight right now (unexpired leases) per endpoint."""
    if not endpoint_ids:
        return {}
    param = database.obj.param
    cursor = database.execute_sql(
        "SELECT endpoint_id, COUNT(*) FROM delivery WHERE lease_until > {p} AND endpoint_id IN ({ids}) "
        "GROUP BY endpoint_id".format(p=param, ids=", ".join([param] * len(endpoint_ids))),
        [Delivery.lease_until.db_value(now), *sorted(endpoint_ids)],
    )
    return dict(cursor.fetchall())


def _take_leases(messages: list[DeliveryMessage], lease_until: datetime) -> set[str]:
    """Lease each message's delivery while its attempt is still the next one; the ids leased."""
    param = database.obj.param
    still_next = " OR ".join([f"(id = {param} AND attempts = {param})"] * len(messages))
    keys = [value for message in messages for value in (message.delivery_id, message.attempt - 1)]
    lease = Delivery.lease_until.db_value(lease_until)
    taken = database.execute_sql(f"UPDATE delivery SET lease_until = {param} WHERE {still_next}", [lease, *keys]).rowcount
    if taken == len(messages):
        return {message.delivery_id for message in messages}
    # A slower worker recorded one of these attempts in the meantime: find out which.
    cursor = database.execute_sql(f"SELECT id FROM delivery WHERE lease_until = {param} AND ({still_next})", [lease, *keys])
    return {delivery_id for delivery_id, in cursor.fetchall()}


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


def record(message: DeliveryMessage, outcome: Outcome, offline_after: int) -> bool:
    """Write one attempt; False if another worker recorded this attempt already."""
    return record_many([(message, outcome)], offline_after)[0]


def record_many(items: Sequence[tuple[DeliveryMessage, Outcome]], offline_after: int) -> list[bool]:
    """Write attempts, their deliveries' new state and endpoint presence in one durable commit.

    For each item, True if it is recorded (now, or by this very outcome in a commit
    whose acknowledgement was lost), False if another worker recorded that attempt.
    A batch that breaks a constraint is written again one item at a time, so one bad
    item does not hold up the others.
    """
    try:
        return _record_batch(items, offline_after)
    except peewee.IntegrityError:
        if len(items) == 1:
            return [_recorded(items[0][1])]
    results: list[bool] = []
    for item in items:
        try:
            results.extend(_record_batch([item], offline_after))
        except peewee.IntegrityError:
            results.append(_recorded(item[1]))
    return results


@retrying
def _record_batch(items: Sequence[tuple[DeliveryMessage, Outcome]], offline_after: int) -> list[bool]:
    now = utcnow()
    with write():
        touched = _lock_touched_endpoints(items, now)
        results: list[bool] = []
        fresh: list[tuple[DeliveryMessage, Outcome]] = []
        for message, outcome in items:
            if _advance_delivery(message, outcome, now):
                fresh.append((message, outcome))
                results.append(True)
            else:
                # Another worker's record, or ours from a commit whose acknowledgement was lost.
                results.append(_recorded(outcome))
        if fresh:
            sqltext.insert_rows(Attempt, [_attempt_row(message, outcome) for message, outcome in fresh])
        for message, outcome in fresh:
            if message.endpoint_id in touched:
                _update_presence(message, outcome, offline_after, now)
    return results


def _recorded(outcome: Outcome) -> bool:
    return Attempt.select().where(Attempt.id == outcome.attempt_id).exists()


def _lock_touched_endpoints(items: Sequence[tuple[DeliveryMessage, Outcome]], now: datetime) -> set[str]:
    """Lock (in id order, as ``claim_many`` does: no deadlock) the endpoints these outcomes change.

    A plain success of a healthy endpoint changes nothing on its row, so deliveries to
    one endpoint do not queue on it.
    """
    endpoints = {
        endpoint.id: endpoint for endpoint in sqltext.models_in(Endpoint, "id", sorted({m.endpoint_id for m, _ in items}))
    }
    touched = sorted(
        {
            message.endpoint_id
            for message, outcome in items
            if message.endpoint_id in endpoints
            and (outcome.disable_reason or presence.needs_update(endpoints[message.endpoint_id], outcome.status == "delivered", now))
        }
    )
    sqltext.models_in(Endpoint, "id", touched, lock=True)
    return set(touched)


def _advance_delivery(message: DeliveryMessage, outcome: Outcome, now: datetime) -> bool:
    """Move the delivery past this attempt, if it is still the next one (False: recorded elsewhere)."""
    values: dict[str, Any] = {
        "attempts": message.attempt,
        "status": outcome.status,
        "next_attempt_at": outcome.next_attempt_at,
        "last_status_code": outcome.last_status_code,
        "last_error": outcome.last_error,
        "lease_until": None,
        # The outbox mark: the next attempt's message is not confirmed yet.
        "enqueued_at": None,
        "updated_at": now,
    }
    if outcome.status == "delivered":
        values["delivered_at"] = now
    return bool(sqltext.update_where(Delivery, values, {"id": message.delivery_id, "attempts": message.attempt - 1}))


def _attempt_row(message: DeliveryMessage, outcome: Outcome) -> dict[str, Any]:
    return {
        "id": outcome.attempt_id,
        "delivery": message.delivery_id,
        "tenant": message.tenant_id,
        "event": message.event_id,
        "endpoint": message.endpoint_id,
        "attempt_no": message.attempt,
        "trigger": message.trigger,
        "outcome": outcome.status,
        "next_attempt_at": outcome.next_attempt_at,
        **outcome.attempt_fields,
    }


def _update_presence(message: DeliveryMessage, outcome: Outcome, offline_after: int, now: datetime) -> None:
    """Apply one outcome to its (locked) endpoint, read afresh: an earlier item may have changed it."""
    endpoint = Endpoint.get_or_none(Endpoint.id == message.endpoint_id)
    if endpoint is None:
        return
    if outcome.status == "delivered" and presence.needs_update(endpoint, True, now):
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
