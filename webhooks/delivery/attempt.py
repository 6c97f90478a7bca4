"""One message, from its lane to its settlement: claim, sign, call, judge, record, send on, ack.

The order is what makes the guarantees: the attempt is recorded (durably) before its
message is acked, so a crash costs at most a repeated attempt; the next attempt's
message is published after the record, and the outbox mark after that, so a message
lost on the way is republished by the relay. A message that only has to wait (its
endpoint's rate limit) goes back to its lane, paused, without a trip through the broker.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any

from webhooks import metrics
from webhooks.secrecy import mask
from webhooks.delivery.claims import Claim, ClaimState
from webhooks.delivery.classify import Verdict, classify
from webhooks.delivery.decide import Step, after_attempt
from webhooks.delivery.lane import Held, Slot
from webhooks.delivery.database_work import Stopping
from webhooks.delivery.destinations import Parcel
from webhooks.delivery.runtime import Runtime
from webhooks.delivery.http_result import MAX_BODY_BYTES, HttpResult, counts_towards_offline, kept_headers, without_nul
from webhooks.delivery.window import Signal, signal_of
from webhooks.storage.ids import new_id
from webhooks.messaging.messages import DeliveryMessage
from webhooks.observability import attempt_spans
from webhooks.delivery.outgoing import active_secrets, build_request
from webhooks.delivery.records import Outcome
from webhooks.storage.timeutil import utcnow
from webhooks.storage.statuses import DeliveryStatus

log = logging.getLogger(__name__)

#: A claim outlives the call by this much, so a slow but live worker keeps its attempt.
LEASE_MARGIN_SECONDS = 5.0



class Attempts:
    """Handles the messages the lanes hand out."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.ladder = runtime.settings.ladder
        self.topology = runtime.settings.topology

    async def handle(self, held: Held) -> None:
        """Claim the message's attempt and act on the claim."""
        try:
            claim = await self.rt.db.until_up(self.rt.db.claims, held.message)
        except Stopping:
            self.release(held.slot, Signal.NEUTRAL)
            self.rt.give_back([held])
            return
        finally:
            self.rt.lanes.claimed(held, self.rt.loop.time())
            self.rt.wake()
        if claim.state is ClaimState.CLAIMED and claim.endpoint is not None:
            await self._attempt(held, claim)
            return
        self.release(held.slot, Signal.NEUTRAL)
        if claim.state is ClaimState.THROTTLED:
            self._pause(held, claim.wait)
        elif claim.state is ClaimState.BUSY:
            # Another worker holds this attempt (a duplicate message): look again in a second.
            await self.rt.broker.move(held.receipt, self.topology.defer, *held.message.encode())
        else:
            message = held.message
            log.info("%s delivery=%s attempt=%d", claim.state.value, message.delivery_id, message.attempt)
            if claim.fallback_copy is not None:
                await self._publish_first(claim.fallback_copy)
            held.ack()

    def release(self, slot: Slot | None, signal: Signal) -> None:
        """The call (or the claim that made none) is over: its window slot is free. Called when
        the call ends and, whatever happened, when the delivery is over (``Slot.release`` acts once)."""
        if slot is None or not slot.held:
            return
        now = self.rt.loop.time()
        if slot.release(signal, now, self.rt.lag.allowance(now)):
            metrics.WINDOW_CUTS.labels("latency" if signal is Signal.ANSWERED else "failure").inc()
        self.rt.lanes.wake(slot.lane, now)
        self.rt.wake()

    def _pause(self, held: Held, seconds: float) -> None:
        """The endpoint's rate limit is used up: its lane waits, this message first in line."""
        loop = self.rt.loop
        loop.call_at(self.rt.lanes.pause(held, seconds, loop.time()), self._unpause, held.lane)

    def _unpause(self, lane: Any) -> None:
        loop = self.rt.loop
        if lane.paused_until > loop.time():
            # uvloop keeps time in whole milliseconds: its timer may fire up to one early.
            loop.call_at(lane.paused_until, self._unpause, lane)
            return
        self.rt.lanes.wake(lane, loop.time())
        self.rt.wake()

    async def _attempt(self, held: Held, claim: Claim) -> None:
        message, endpoint = held.message, claim.endpoint
        assert endpoint is not None
        started = utcnow()
        secrets = active_secrets(endpoint.secret, endpoint.previous_secret, endpoint.previous_secret_until, started)
        request = build_request(
            message.event_id, message.event_type, message.event_created_at, message.payload, secrets, int(time.time())
        )
        assert held.slot is not None
        sent_at = self.rt.loop.time()
        held.slot.goes_out(sent_at)
        result = await self.rt.destinations.deliver(endpoint.url, Parcel(message.event_id, message.event_type, request))
        self.release(held.slot, signal_of(result.status_code, result.error_class))

        verdict = classify(result.status_code, result.headers, result.error_class, result.error)
        step = after_attempt(message, verdict, claim.prior_status or DeliveryStatus.PENDING, claim.manual_attempts, claim.due_at,
                             self.ladder, self.topology, started, fallback=claim.fallback)
        outcome = Outcome(
            attempt_id=new_id("att"),
            status=step.status,
            next_attempt_at=step.next_attempt_at,
            attempt_fields=attempt_fields(started, endpoint.url, request.headers, result, verdict),
            last_status_code=result.status_code,
            last_error=None if verdict.delivered else verdict.summary,
            manual_attempts=step.manual_attempts,
            counts_as_failure=counts_towards_offline(result.status_code),
            disable_reason=verdict.summary if verdict.gone and not claim.fallback else None,
            exhausted=step.exhausted,
            fallback=claim.fallback,
            phases=result.phases,
        )
        try:
            recorded = await self.rt.db.until_up(self.rt.db.records, (message, outcome))
        except Stopping:
            log.info("stopping before the attempt was recorded; the message goes back to be attempted again")
            self.rt.give_back([held])
            return
        if not recorded:
            log.info("attempt recorded elsewhere delivery=%s attempt=%d", message.delivery_id, message.attempt)
            held.ack()
            return
        _log(message, verdict, step, result)
        metrics.observe_attempt(result.status_code, result.error_class, result.duration_ms / 1000, step.status)
        attempt_spans.recorder.note(held, outcome, step)
        await self._send_on(message, step)
        held.ack()

    async def _publish_first(self, message: DeliveryMessage) -> None:
        """Publish the first attempt of a delivery written meanwhile (a fallback copy) and mark it;
        what is not confirmed is the relay's."""
        if await self.rt.broker.publish(self.topology.primary, *message.encode()):
            try:
                await self.rt.db.marks(message)
            except Exception:  # noqa: BLE001 - a lost mark costs one duplicate from the relay
                log.warning("outbox mark failed for delivery=%s; the relay will publish it again", message.delivery_id,
                            exc_info=True)
        else:
            log.warning("fallback delivery=%s not confirmed by the broker; the relay will publish it",
                        message.delivery_id)

    async def _send_on(self, message: DeliveryMessage, step: Step) -> None:
        """Publish what follows a recorded attempt: the next attempt, or a copy for the dead-letter queue."""
        if step.next_message is not None and step.queue is not None:
            if await self.rt.broker.publish(step.queue, *step.next_message.encode()):
                try:
                    await self.rt.db.marks(step.next_message)
                except Exception:  # noqa: BLE001 - a lost mark costs one duplicate from the relay
                    log.warning("outbox mark failed for delivery=%s; the relay will publish it again",
                                message.delivery_id, exc_info=True)
            else:
                log.warning("next attempt of delivery=%s not confirmed by the broker; the relay will publish it",
                            message.delivery_id)
        elif step.exhausted:
            # A copy for operators: the database is the list of failed deliveries (replayed from there).
            if not await self.rt.broker.publish(self.topology.dead, *message.encode()):
                log.warning("dead-letter copy of delivery=%s not confirmed", message.delivery_id)


def attempt_fields(
    started: datetime, url: str, headers: dict[str, str], result: HttpResult, verdict: Verdict
) -> dict[str, Any]:
    """The attempt row's columns. ``error`` says what went wrong in the words the delivery's
    ``last_error`` uses; a 2xx whose body then stalled keeps the transport error for whoever looks."""
    return {
        "started_at": started,
        "duration_ms": round(result.duration_ms, 2),
        "url": mask(url),  # a destination's password is never shown
        "request_headers": headers,
        "response_status": result.status_code,
        # Capped again here: a result from any destination is stored within the same bound.
        "response_headers": kept_headers(result.headers.items()) or None,
        "response_body": _stored_body(result.body),
        "error_class": verdict.error_class,
        "error": result.error if verdict.delivered else verdict.summary,
    }


def _stored_body(body: bytes) -> str | None:
    """The response body as the attempt keeps it: its first ``MAX_BODY_BYTES`` bytes, as storable text."""
    return without_nul(body[:MAX_BODY_BYTES].decode("utf-8", errors="replace")) if body else None


def _log(message: DeliveryMessage, verdict: Verdict, step: Step, result: HttpResult) -> None:
    log.info(
        "attempted delivery=%s event=%s endpoint=%s attempt=%d trigger=%s result=%s status=%s ms=%.0f%s%s",
        message.delivery_id, message.event_id, message.endpoint_id, message.attempt, message.trigger,
        verdict.summary, step.status, result.duration_ms,
        f" next_attempt_at={step.next_attempt_at.isoformat()}Z" if step.next_attempt_at else "",
        f" trace_id={message.traceparent[3:35]}" if message.traceparent else "",  # its span is made later
    )
    if step.exhausted:  # a failed resend outside the ladder is not dead-lettered again
        log.warning("dead-lettered delivery=%s event=%s after %d attempts", message.delivery_id, message.event_id, message.attempt)
