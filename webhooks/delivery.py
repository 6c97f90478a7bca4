"""One delivery attempt from message to decision: claim, sign, call, classify, record.

Runs on a delivery thread and never touches the AMQP connection: it returns a
``Handled`` saying what to publish before the message is acked, and the worker's
connection thread does that.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable

from webhooks import metrics, store
from webhooks.classify import Verdict, classify
from webhooks.config import Settings
from webhooks.endpoint_view import EndpointView
from webhooks.group_commit import GroupCommit
from webhooks.http_client import HttpResult, Sender
from webhooks.ids import new_id
from webhooks.messages import DeliveryMessage, PoisonMessage
from webhooks.outbox import mark_enqueued
from webhooks.outgoing import active_secrets, build_request
from webhooks.publisher import Outgoing
from webhooks.store import ClaimState, Limits, Outcome
from webhooks.timeutil import utcnow

log = logging.getLogger(__name__)

#: A claim outlives the call by this much, so a slow but live worker keeps its attempt.
LEASE_MARGIN_SECONDS = 5.0

#: A delivery thread waits at most this long in total for its endpoint's limits
#: (in-flight cap held by other processes, rate limit) before deferring the message.
MAX_LOCAL_WAIT_SECONDS = 1.0

#: Step of that wait (seconds): a slot freed elsewhere is noticed about this fast.
LOCAL_WAIT_STEP_SECONDS = 0.02

#: Response bodies are stored up to this size (the sender reads no more).
MAX_STORED_BODY = 20 * 1024


@dataclass
class Handled:
    """What the connection thread must do with the message."""

    publish: list[Outgoing] = field(default_factory=list)
    #: Run on the delivery thread once every publish is confirmed (the outbox mark).
    after_publish: Callable[[], None] | None = None
    #: False: return the message to the queue (the work could not be done).
    ack: bool = True


@dataclass(frozen=True)
class Step:
    status: str
    #: The waiting tier the next attempt goes through, and the whole wait (Retry-After may add).
    tier_ms: int | None = None
    delay_ms: int | None = None
    next_message: DeliveryMessage | None = None


class Processor:
    def __init__(self, settings: Settings, sender: Sender) -> None:
        self.settings = settings
        self.topology = settings.topology
        self.ladder = settings.ladder
        self.sender = sender
        self.limits = Limits(settings.endpoint_max_in_flight, settings.delivery_timeout + LEASE_MARGIN_SECONDS)
        # Every delivery thread's claims and records go through these: one transaction per batch.
        self._claim_one: GroupCommit[DeliveryMessage, store.Claim] = GroupCommit(
            lambda messages: store.claim_many(messages, self.limits)
        )
        self._record_one: GroupCommit[tuple[DeliveryMessage, Outcome], bool] = GroupCommit(
            lambda items: store.record_many(items, settings.offline_after_failures)
        )

    def handle(self, body: bytes, headers: dict[str, Any] | None) -> Handled:
        """Process one message from the primary queue."""
        try:
            message = DeliveryMessage.decode(body, headers)
        except PoisonMessage as error:
            log.error("dead-lettered poison message: %s", error)
            return Handled(publish=[(self.topology.dead, body, {**(headers or {}), "error": str(error)})])

        wait = (message.not_before or 0) - time.time()
        if wait > 0.05:
            return Handled(publish=[self._wait_again(message, wait)])

        claim = self._claim(message)
        if claim.state is ClaimState.CLAIMED and claim.endpoint is not None:
            return self._attempt(message, claim.endpoint, claim.prior_status or "pending")
        if claim.state is ClaimState.BUSY:
            return Handled(publish=[(self.topology.defer, *message.encode())])
        if claim.state is ClaimState.THROTTLED:
            return Handled(publish=[self._wait_again(message, claim.wait)])
        log.info("%s delivery=%s attempt=%d", claim.state.value, message.delivery_id, message.attempt)
        return Handled()

    def overflow(self, body: bytes, headers: dict[str, Any] | None) -> Handled:
        """Too many messages of one endpoint in this process: wait in the defer queue (no attempt)."""
        return Handled(publish=[(self.topology.defer, body, dict(headers or {}))])

    def _claim(self, message: DeliveryMessage) -> store.Claim:
        """Claim, waiting here briefly while the endpoint is at its limits in other processes.

        A short wait on this thread is far cheaper than a round trip through the defer
        queue; the scheduler already keeps this process within the per-endpoint cap.
        """
        waited = 0.0
        while True:
            claim = self._claim_one(message)
            if claim.state is not ClaimState.THROTTLED or waited + claim.wait > MAX_LOCAL_WAIT_SECONDS:
                return claim
            pause = min(claim.wait, LOCAL_WAIT_STEP_SECONDS)
            time.sleep(pause)
            waited += pause

    def _attempt(self, message: DeliveryMessage, endpoint: EndpointView, prior_status: str) -> Handled:
        started = utcnow()
        secrets = active_secrets(endpoint.secret, endpoint.previous_secret, endpoint.previous_secret_until, started)
        request = build_request(
            message.event_id, message.event_type, message.event_created_at, message.payload, secrets, int(time.time())
        )
        result = self.sender.post(endpoint.url, request.headers, request.body)
        if result.error_class == "pool_timeout":
            # Our own connection pool was full: not the endpoint's fault, not an attempt.
            store.release(message)
            return Handled(publish=[(self.topology.defer, *message.encode())])

        verdict = classify(result.status_code, result.headers, result.error_class, result.error)
        in_ladder = prior_status in store.LADDER_STATUSES
        step = self._next_step(message, verdict, prior_status)
        next_at = None if step.delay_ms is None else started + timedelta(milliseconds=step.delay_ms)
        outcome = Outcome(
            attempt_id=new_id("att"),
            status=step.status,
            next_attempt_at=next_at,
            attempt_fields=_attempt_fields(started, endpoint.url, request.headers, result, verdict),
            last_status_code=result.status_code,
            last_error=None if verdict.delivered else verdict.summary,
            counts_as_failure=result.status_code != 429,
            disable_reason=verdict.summary if verdict.gone else None,
            exhausted=step.status == "failed" and in_ladder,
        )
        if not self._record_one((message, outcome)):
            log.info("attempt recorded elsewhere delivery=%s attempt=%d", message.delivery_id, message.attempt)
            return Handled()
        self._log(message, verdict, step.status, result, next_at, outcome.exhausted)
        metrics.observe_attempt(result.status_code, result.duration_ms / 1000, step.status)

        if step.next_message is not None and step.tier_ms is not None:
            queue = self.topology.wait_queue(step.tier_ms)
            following = step.next_message
            return Handled(publish=[(queue, *following.encode())], after_publish=lambda: mark_enqueued([following]))
        if step.status == "failed" and in_ladder:
            return Handled(publish=[(self.topology.dead, *message.encode())])
        return Handled()

    def _next_step(self, message: DeliveryMessage, verdict: Verdict, prior_status: str) -> "Step":
        """The delivery's new status and, while the ladder goes on, its next attempt."""
        if verdict.delivered:
            return Step("delivered")
        if verdict.gone:
            # Kept for whoever enables the endpoint again: released in order then.
            return Step("parked")
        if prior_status not in store.LADDER_STATUSES:
            # A resend of a finished delivery is one attempt, outside the ladder.
            return Step("delivered" if prior_status == "delivered" else "failed")
        tier_ms = self.ladder.next_delay_ms(message.attempt)
        if tier_ms is None:
            return Step("failed")
        delay_ms, not_before = tier_ms, None
        if verdict.retry_after is not None and verdict.retry_after * 1000 > tier_ms:
            # Wait in this tier, then hop down the tiers until Retry-After has passed.
            delay_ms = int(verdict.retry_after * 1000)
            not_before = time.time() + verdict.retry_after
        following = message.next(attempt=message.attempt + 1, trigger="ladder", not_before=not_before)
        return Step("retrying", tier_ms, delay_ms, following)

    def _wait_again(self, message: DeliveryMessage, seconds: float) -> Outgoing:
        """Back to a waiting tier, without an attempt: the longest that does not overshoot."""
        tier = self.ladder.longest_tier_within(int(seconds * 1000))
        queue = self.topology.defer if tier is None else self.topology.wait_queue(tier)
        return (queue, *message.encode())

    def _log(
        self,
        message: DeliveryMessage,
        verdict: Verdict,
        status: str,
        result: HttpResult,
        next_at: datetime | None,
        exhausted: bool,
    ) -> None:
        log.info(
            "attempted delivery=%s event=%s endpoint=%s attempt=%d trigger=%s result=%s status=%s ms=%.0f%s",
            message.delivery_id,
            message.event_id,
            message.endpoint_id,
            message.attempt,
            message.trigger,
            verdict.summary,
            status,
            result.duration_ms,
            f" next_attempt_at={next_at.isoformat()}Z" if next_at else "",
        )
        if exhausted:  # a failed resend outside the ladder is not dead-lettered again
            log.warning("dead-lettered delivery=%s event=%s after %d attempts", message.delivery_id, message.event_id, message.attempt)


def _attempt_fields(
    started: datetime, url: str, headers: dict[str, str], result: HttpResult, verdict: Verdict
) -> dict[str, Any]:
    # A 2xx whose body then stalled is delivered (the receiver accepted it); the
    # transport error is still kept in ``error`` for whoever investigates.
    return {
        "started_at": started,
        "duration_ms": round(result.duration_ms, 2),
        "url": url,
        "request_headers": headers,
        "response_status": result.status_code,
        "response_headers": result.headers or None,
        "response_body": result.body[:MAX_STORED_BODY].decode("utf-8", errors="replace") if result.body else None,
        "error_class": verdict.error_class,
        "error": result.error,
    }
