"""Claiming an attempt: a lease on the delivery while its attempt is the next one (one ladder per delivery).

A message whose attempt number is no longer the next one is stale and dropped, so
redeliveries, relay races and resends never start a second retry chain. The claim is
a lease, so a worker killed mid-attempt does not hold the delivery for ever.

Claims come in batches (the engine's group commit). The common case, a ladder attempt
for an endpoint that is online, enabled and has no rate limit, is one guarded UPDATE
for the whole batch, which checks each delivery's endpoint and returns what the attempt
needs of it: on PostgreSQL a transaction of its own in one round trip. Everything else
(resends, parking, cancelling, rate limits, duplicates, stale messages, fallback copies:
``webhooks.ingest.fallback``) is decided row by row, as before, in a transaction after it.
A delivery that parks there because its endpoint is away makes its fallback copy in the same
transaction; the claim hands the copy's message over, to be published. How many calls an
endpoint gets at once is the engine's business (its adaptive windows), not the
database's.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple, Sequence


from webhooks.ingest import fallback
from webhooks.health import presence
from webhooks.storage import delivery_sql, sqltext
from webhooks.storage.db import RELAXED_COMMIT, database, durable_commit, is_postgres, relaxed_commit, retrying, write
from webhooks.storage.pg_prepared import PreparedStatements, small_batch_name
from webhooks.delivery.endpoint_view import EndpointView
from webhooks.messaging.messages import DeliveryMessage
from webhooks.storage.models import Delivery, Endpoint
from webhooks.storage.statuses import DeliveryStatus, LADDER_STATUSES, MANUAL_STATUSES, PROBE_STATUSES, UNFINISHED_STATUSES
from webhooks.storage.timeutil import utcnow


class ClaimState(enum.Enum):
    """What a claim came to (a word for the logs; the delivery's status is a ``DeliveryStatus``)."""

    CLAIMED = "claimed"
    #: The attempt was made already (or the delivery is finished): drop the message.
    STALE = "stale"
    #: Another worker holds the attempt right now: try again shortly.
    BUSY = "busy"
    #: The endpoint's rate limit is used up: try again after ``wait`` seconds.
    THROTTLED = "throttled"
    #: The endpoint is disabled, or offline (and this is not a probe): the delivery parked.
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
    #: Resends and recovers made before this attempt (they do not count on the ladder).
    manual_attempts: int = 0
    #: When the delivery's next ladder attempt was due (a failed resend keeps that date).
    due_at: datetime | None = None
    #: A fallback delivery: to the endpoint's ``fallback_url``, its outcome not the endpoint's.
    fallback: bool = False
    #: PARKED: the first attempt of the fallback copy its parking made, to publish.
    fallback_copy: DeliveryMessage | None = None


def claim(message: DeliveryMessage, lease_seconds: float) -> Claim:
    """Take attempt ``message.attempt`` of its delivery, if its endpoint may be called now."""
    return claim_many([message], lease_seconds)[0]


@retrying
def claim_many(messages: Sequence[DeliveryMessage], lease_seconds: float) -> list[Claim]:
    """Claim each message's attempt; a delivery in the batch twice is claimed once.

    On PostgreSQL the common case is one statement, a transaction of its own, sent in one
    round trip; the rest (and everything on SQLite) is decided in one transaction.
    """
    now = utcnow()
    lease_until = now + timedelta(seconds=lease_seconds)
    claims: list[Claim | None] = [None] * len(messages)
    ladder: dict[str, int] = {}
    for index, message in enumerate(messages):
        if message.trigger == "ladder":
            ladder.setdefault(message.delivery_id, index)

    def lease_common() -> None:
        for delivery_id, claim_ in _lease_common([messages[index] for index in ladder.values()], now,
                                                 lease_until).items():
            claims[ladder[delivery_id]] = claim_

    def decide_rest() -> None:
        rest = [index for index, claim_ in enumerate(claims) if claim_ is None]
        if rest:
            decided = _claim_each([messages[index] for index in rest], now, lease_until,
                                  already={messages[i].delivery_id for i, c in enumerate(claims) if c is not None})
            for index, claim_ in zip(rest, decided):
                claims[index] = claim_

    if is_postgres() and not database.in_transaction():
        lease_common()
        if None in claims:
            with write():
                relaxed_commit()
                decide_rest()
    else:
        with write():
            # Only leases are written on the common path: lost in a server crash, an attempt is
            # merely made again. Parking and cancelling switch durability back on below.
            relaxed_commit()
            lease_common()
            decide_rest()
    return [claim_ for claim_ in claims if claim_ is not None]


def _lease_common(messages: list[DeliveryMessage], now: datetime, lease_until: datetime) -> dict[str, Claim]:
    """Lease every message's delivery whose attempt is still the next one and not leased, if its
    endpoint is in the common case (``delivery_sql.lease_sql``): one statement; the claims made.

    Outside a transaction (PostgreSQL) the statement is a transaction of its own, with a relaxed
    commit (a lease lost in a server crash only means the attempt is made again). If the batch
    is run again (``retrying``, after a lost connection), what this statement leased the first
    time comes back BUSY and is claimed once the lease ends.
    """
    if not messages:
        return {}
    sql = delivery_sql.lease_sql(len(messages))
    params: list[Any] = [value for m in delivery_sql.in_lock_order(messages) for value in (m.delivery_id, m.attempt - 1)]
    stamp = Delivery.lease_until.db_value
    params += [stamp(lease_until), stamp(now)]
    if database.in_transaction():
        rows = database.execute_sql(sql, params).fetchall()
    else:
        rows = _lease_alone(sql, params, small_batch_name("claim_lease", len(messages)))
    if not rows:
        return {}
    to_datetime = Delivery.next_attempt_at.python_value
    if len(rows[0]) > 5:  # PostgreSQL: the endpoint's ``LEASE_ENDPOINT_COLUMNS`` came back with the lease
        until = Endpoint.previous_secret_until.python_value
        opened = Endpoint.secret.python_value  # the lease returns them sealed, as stored
        views = {row[4]: EndpointView(row[4], opened(row[5]), opened(row[6]), opened(row[7]), until(row[8]))
                 for row in rows}
    else:
        views = {e.id: EndpointView.of(e) for e in sqltext.models_in(Endpoint, "id", sorted({row[4] for row in rows}))}
    return {
        delivery_id: Claim(ClaimState.CLAIMED, status, views[endpoint_id], 0.0, manual, to_datetime(due_at))
        for delivery_id, status, manual, due_at, endpoint_id, *_ in rows
    }


#: The small leases this process has prepared, per connection (``pg_prepared``).
prepared = PreparedStatements()


def _lease_alone(sql: str, params: list[Any], name: str | None) -> list[tuple[Any, ...]]:
    """PostgreSQL, no transaction open: the lease as a transaction of its own, one round trip,
    prepared (``name``) when the batch is small."""
    if name is not None:
        prepared.prepare(name, sql)  # once per connection, outside any transaction
    if name is None:
        return database.execute_sql(f"{RELAXED_COMMIT}; {sql}", params).fetchall()
    return prepared.again_if_vanished(  # gone: the implicit transaction wrote nothing
        lambda prepare: database.execute_sql(f"{RELAXED_COMMIT}; {prepared.sql_for(name, sql) if prepare else sql}",
                                             params).fetchall())


#: What the row-by-row path reads of each delivery.
_COLUMNS = ("id", "status", "attempts", "lease_until", "endpoint", "manual_attempts", "next_attempt_at", "fallback")


class _Row(NamedTuple):
    status: str
    attempts: int
    lease_until: datetime | None
    endpoint: Endpoint
    manual_attempts: int
    next_attempt_at: datetime | None
    fallback: bool


#: The statuses an attempt may act on, by its trigger (resends and recovers: ``MANUAL_STATUSES``).
ALLOWED_STATUSES = {"ladder": LADDER_STATUSES, "probe": PROBE_STATUSES}


def _claim_each(messages: list[DeliveryMessage], now: datetime, lease_until: datetime,
                already: set[str]) -> list[Claim]:
    """Decide the messages the common path did not lease, one by one."""
    endpoints = {
        endpoint.id: endpoint
        for endpoint in sqltext.models_in(Endpoint, "id", sorted({m.endpoint_id for m in messages}))
    }
    limited = sorted({m.endpoint_id for m in messages if m.endpoint_id in endpoints and endpoints[m.endpoint_id].rate_limit})
    if limited:
        # Their token buckets are read and written under the row lock (in id order: no deadlock).
        endpoints = {**endpoints, **{e.id: e for e in sqltext.models_in(Endpoint, "id", limited, lock=True)}}
    rows = {
        delivery_id: _Row(status, attempts, held, endpoints[endpoint_id], manual, due, bool(copy))
        for delivery_id, status, attempts, held, endpoint_id, manual, due, copy in sqltext.rows_in(
            Delivery, _COLUMNS, "id", sorted({m.delivery_id for m in messages})
        )
        if endpoint_id in endpoints
    }
    batch = _Decisions(rows, now, already)
    claims = [batch.decide(message) for message in messages]
    if batch.settled:
        durable_commit()
        parked = [message for message, status, statuses in batch.settled
                  if _set_status(message, status, statuses) and status == DeliveryStatus.PARKED
                  and _misses(rows[message.delivery_id])]
        copies = fallback.copy_parked(parked, now)
        claims = [Claim(claim_.state, claim_.prior_status, fallback_copy=copies[message.delivery_id])
                  if message.delivery_id in copies else claim_ for message, claim_ in zip(messages, claims)]
    if batch.leased:
        taken = _take_leases(batch.leased, lease_until)
        claims = [
            claim_ if claim_.state is not ClaimState.CLAIMED or message.delivery_id in taken
            else Claim(ClaimState.STALE, claim_.prior_status)
            for message, claim_ in zip(messages, claims)
        ]
    for endpoint_id, tokens in batch.tokens.items():
        Endpoint.update(rate_tokens=tokens, rate_updated_at=now).where(Endpoint.id == endpoint_id).execute()
    return claims


def _misses(row: _Row) -> bool:
    """Whether a delivery that parked is missed by its endpoint, which names a fallback to tell instead."""
    endpoint = row.endpoint
    return (not row.fallback and endpoint.fallback_url is not None
            and fallback.tells_fallback(endpoint.disabled, endpoint.health))


def _tokens(endpoint: Endpoint, now: datetime) -> float:
    """Tokens in the endpoint's rate bucket now (refilled at ``rate_limit`` per second, at most that many)."""
    rate = float(endpoint.rate_limit)
    tokens = rate if endpoint.rate_tokens is None else endpoint.rate_tokens
    if endpoint.rate_updated_at is not None:
        tokens = min(rate, tokens + (now - endpoint.rate_updated_at).total_seconds() * rate)
    return tokens


class _Decisions:
    """The row-by-row claim decisions of one transaction, with rate buckets kept as they change."""

    def __init__(self, rows: dict[str, _Row], now: datetime, already: set[str]) -> None:
        self.rows = rows
        self.now = now
        #: Rate buckets changed by this batch: endpoint id -> tokens left.
        self.tokens: dict[str, float] = {}
        self.leased: list[DeliveryMessage] = []
        #: Status changes to write: (message, new status, statuses it may change from).
        self.settled: list[tuple[DeliveryMessage, str, tuple[str, ...]]] = []
        self._decided = set(already)

    def decide(self, message: DeliveryMessage) -> Claim:
        allowed = ALLOWED_STATUSES.get(message.trigger, MANUAL_STATUSES)
        row = self.rows.get(message.delivery_id)
        if row is None or row.attempts != message.attempt - 1 or row.status not in allowed:
            return Claim(ClaimState.STALE, None if row is None else row.status)
        if message.delivery_id in self._decided:
            return Claim(ClaimState.BUSY, row.status)
        endpoint = row.endpoint
        if endpoint.deleted_at is not None:
            return self._settle(message, row.status, ClaimState.CANCELLED, DeliveryStatus.CANCELLED, UNFINISHED_STATUSES)
        if row.fallback:
            return self._fallback(message, row)
        if message.trigger == "probe" and (endpoint.health != presence.OFFLINE or endpoint.disabled):
            # Back already (the release sends what is parked, in order, one at a time) or
            # disabled by someone meanwhile: a probe is only for an offline endpoint.
            return Claim(ClaimState.STALE, row.status)
        parks = endpoint.disabled or (
            message.trigger == "ladder"
            and (
                # Offline, nothing climbs the ladder: the clock probes the endpoint instead.
                endpoint.health == presence.OFFLINE
                # A retry from before the outage, back from a waiting tier while the parked
                # deliveries are released: it joins them, to arrive in creation order.
                or (endpoint.health == presence.RECOVERING and row.status == DeliveryStatus.RETRYING)
            )
        )
        if parks:
            return self._settle(message, row.status, ClaimState.PARKED, DeliveryStatus.PARKED, LADDER_STATUSES)
        if row.lease_until is not None and row.lease_until > self.now:
            return Claim(ClaimState.BUSY, row.status)
        tokens = None
        if endpoint.rate_limit:
            tokens = self.tokens.get(endpoint.id, _tokens(endpoint, self.now))
            if tokens < 1.0:
                return Claim(ClaimState.THROTTLED, row.status, wait=(1.0 - tokens) / endpoint.rate_limit)
            self.tokens[endpoint.id] = tokens - 1.0
        self.leased.append(message)
        self._decided.add(message.delivery_id)
        return Claim(ClaimState.CLAIMED, row.status, EndpointView.of(endpoint), 0.0, row.manual_attempts, row.next_attempt_at)

    def _fallback(self, message: DeliveryMessage, row: _Row) -> Claim:
        """A fallback delivery: to the endpoint's ``fallback_url`` whatever the endpoint's state (it never
        parks; the endpoint's rate limit is its receiver's, not the fallback's). No fallback any more:
        the copy is cancelled (the endpoint's own delivery still waits for it)."""
        endpoint = row.endpoint
        if message.trigger == "probe":
            return Claim(ClaimState.STALE, row.status)  # a probe is the endpoint's own
        if endpoint.fallback_url is None:
            return self._settle(message, row.status, ClaimState.CANCELLED, DeliveryStatus.CANCELLED, UNFINISHED_STATUSES)
        if row.lease_until is not None and row.lease_until > self.now:
            return Claim(ClaimState.BUSY, row.status)
        self.leased.append(message)
        self._decided.add(message.delivery_id)
        return Claim(ClaimState.CLAIMED, row.status, EndpointView.fallback_of(endpoint), 0.0, row.manual_attempts,
                     row.next_attempt_at, fallback=True)

    def _settle(self, message: DeliveryMessage, prior: str, state: ClaimState, status: DeliveryStatus,
                statuses: tuple[str, ...]) -> Claim:
        """Decided without an attempt: the delivery moves to ``status`` if it is still in one of ``statuses``."""
        self.settled.append((message, status, statuses))
        self._decided.add(message.delivery_id)
        return Claim(state, prior)


def _take_leases(messages: list[DeliveryMessage], lease_until: datetime) -> set[str]:
    """Lease each message's delivery while its attempt is still the next one; the ids leased."""
    keys = [value for message in messages for value in (message.delivery_id, message.attempt - 1)]
    lease = Delivery.lease_until.db_value(lease_until)
    taken = database.execute_sql(delivery_sql.take_leases_sql(len(messages)), [lease, *keys]).rowcount
    if taken == len(messages):
        return {message.delivery_id for message in messages}
    # A slower worker recorded one of these attempts in the meantime: find out which.
    cursor = database.execute_sql(delivery_sql.leased_sql(len(messages)), [lease, *keys])
    return {delivery_id for delivery_id, in cursor.fetchall()}


def _set_status(message: DeliveryMessage, status: str, statuses: tuple[str, ...]) -> bool:
    """Move the delivery to ``status`` if it is in one of ``statuses``; whether it moved."""
    return bool(
        Delivery.update(status=status, next_attempt_at=None, lease_until=None, spilled_at=None, updated_at=utcnow())
        .where((Delivery.id == message.delivery_id) & Delivery.status.in_(statuses))
        .execute()
    )
