"""What follows an attempt: the delivery's new status and, while the ladder goes on, its next attempt.

Pure rules, no I/O. The n-th failed ladder attempt waits the n-th tier of the ladder;
Retry-After can only lengthen a wait. Resends and recovers are outside the ladder:
when one of them fails on a delivery that is still retrying, the delivery keeps its
place (the attempt it was waiting for stays due when it was due, and the tiers after
it are the ones it would have had), so a person's resend never pushes a delivery
further down the ladder. A resend of a finished delivery is one attempt, no more; a
failed resend of a parked delivery leaves it parked. A final refusal (``Verdict.final``,
an SMTP 5xx) fails a delivery in the ladder at once, as if the ladder had run out. A probe of an offline endpoint is
outside the ladder too: a failed one parks its delivery, its ladder attempts intact. A
fallback delivery never parks: a 410 from the fallback fails it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from webhooks.delivery.classify import Verdict
from webhooks.messaging.ladder import Ladder
from webhooks.messaging.messages import DeliveryMessage
from webhooks.storage.statuses import DeliveryStatus, LADDER_STATUSES
from webhooks.messaging.topology import DEFER_MS, Topology


@dataclass(frozen=True)
class Step:
    status: str
    #: When the next attempt is due (None: there is none).
    next_attempt_at: datetime | None = None
    #: The next attempt's message and the queue it waits in.
    next_message: DeliveryMessage | None = None
    queue: str | None = None
    #: Resends and recovers made so far, this attempt included.
    manual_attempts: int = 0
    #: The ladder ran out on this attempt.
    exhausted: bool = False


def after_attempt(
    message: DeliveryMessage,
    verdict: Verdict,
    prior_status: str,
    manual_before: int,
    due_at: datetime | None,
    ladder: Ladder,
    topology: Topology,
    started: datetime,
    fallback: bool = False,
) -> Step:
    """The step after attempt ``message.attempt``, judged ``verdict``, begun at ``started`` (UTC);
    ``fallback``: of a fallback delivery (``webhooks.ingest.fallback``)."""
    manual = message.trigger != "ladder"
    manual_attempts = manual_before + (1 if manual else 0)
    if verdict.delivered:
        return Step(DeliveryStatus.DELIVERED, manual_attempts=manual_attempts)
    if verdict.gone and fallback:
        # The fallback is gone: nothing to keep its copy for (the endpoint's own delivery waits, parked).
        return Step(DeliveryStatus.FAILED, manual_attempts=manual_attempts)
    if verdict.gone:
        # Kept for whoever enables the endpoint again: released in order then.
        return Step(DeliveryStatus.PARKED, manual_attempts=manual_attempts)
    if message.trigger == "probe":
        # The endpoint is still away: its delivery waits parked, with every ladder attempt
        # it had, for the next probe (``webhooks.health.probes``).
        return Step(DeliveryStatus.PARKED, manual_attempts=manual_attempts)
    if prior_status == DeliveryStatus.PARKED:
        # A resend of a parked delivery that fails leaves it parked, in its place for the
        # in-order release, with the ladder attempts it had left.
        return Step(DeliveryStatus.PARKED, manual_attempts=manual_attempts)
    if prior_status not in LADDER_STATUSES:
        # A resend of a finished delivery is one attempt, outside the ladder.
        return Step(DeliveryStatus.DELIVERED if prior_status == DeliveryStatus.DELIVERED else DeliveryStatus.FAILED, manual_attempts=manual_attempts)
    if verdict.final:
        # Refused for good (e.g. the mailbox does not exist): another attempt cannot help.
        return Step(DeliveryStatus.FAILED, manual_attempts=manual_attempts, exhausted=True)
    if manual:
        return _keep_place(message, verdict, manual_attempts, due_at, ladder, topology, started)
    tier_ms = ladder.next_delay_ms(message.attempt - manual_before)
    if tier_ms is None:
        return Step(DeliveryStatus.FAILED, manual_attempts=manual_attempts, exhausted=True)
    wait_ms, not_before = tier_ms, None
    if verdict.retry_after is not None and verdict.retry_after * 1000 > tier_ms:
        # Wait in this tier, then hop down the tiers until Retry-After has passed.
        wait_ms = int(verdict.retry_after * 1000)
        not_before = time.time() + verdict.retry_after
    following = message.next(attempt=message.attempt + 1, trigger="ladder", not_before=not_before)
    return Step(DeliveryStatus.RETRYING, started + timedelta(milliseconds=wait_ms), following, topology.wait_queue(tier_ms), manual_attempts)


def _keep_place(
    message: DeliveryMessage,
    verdict: Verdict,
    manual_attempts: int,
    due_at: datetime | None,
    ladder: Ladder,
    topology: Topology,
    started: datetime,
) -> Step:
    """A failed resend of a delivery in the ladder: its next ladder attempt stays when it was due."""
    due = max(due_at or started, started)
    if verdict.retry_after is not None:
        due = max(due, started + timedelta(seconds=verdict.retry_after))
    wait_ms = int((due - started).total_seconds() * 1000)
    not_before = time.time() + wait_ms / 1000 if wait_ms > 0 else None
    following = message.next(attempt=message.attempt + 1, trigger="ladder", not_before=not_before)
    return Step(DeliveryStatus.RETRYING, due, following, wait_queue_for(wait_ms, ladder, topology), manual_attempts)


def wait_queue_for(wait_ms: float, ladder: Ladder, topology: Topology) -> str:
    """Where a message waits ``wait_ms`` without overshooting: the longest tier that fits, the
    defer queue, or for less than the defer queue's delay the primary queue (a worker holds
    it in memory until its ``not_before``)."""
    if wait_ms < DEFER_MS:
        return topology.primary
    tier = ladder.longest_tier_within(int(wait_ms))
    return topology.defer if tier is None else topology.wait_queue(tier)
