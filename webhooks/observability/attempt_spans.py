"""The worker's attempt spans: one per recorded attempt, made in batches on a thread of their own.

The event loop only notes what it already holds once an attempt is recorded (``note``: a
tuple appended to a deque, and nothing at all while tracing is off); every
``EVERY_SECONDS`` a thread turns what was noted into spans with the attempt's own start
and end times, each under the span its message names (the request that posted the event,
or the resend's request): the attempts of one event sit side by side in the request's
trace, whichever tier of the ladder they came back from.

A span says what support asks about: tenant, endpoint, delivery and event ids, the
attempt number and trigger, how long the message waited in its endpoint's lane and why
(``rate_limit``: the endpoint's rate limit paused the lane; ``window``: its concurrency
window was full; ``backlog``: it had waited in the database behind the endpoint's backlog),
the status code or error class, the call's duration (and, when it opened a connection, how long the
DNS lookup and the connection took: ``webhooks.dns_ms``, ``webhooks.connect_ms``), and where it goes next (``delivered``,
``tier <delay>``, ``dead``, ``parked``, ``failed``).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from datetime import datetime, timezone
from typing import Any

from opentelemetry.trace import SpanKind

from webhooks.observability import tracing

log = logging.getLogger(__name__)

#: Noted attempts become spans this often (seconds).
EVERY_SECONDS = 0.5

#: Attempts noted and not yet made spans at most; more are dropped (and counted).
MAX_PENDING = 20_000

#: A lane wait shorter than this is no wait (seconds).
NO_WAIT_SECONDS = 0.001


class AttemptSpans:
    """Attempts noted on the loop, made spans off it."""

    def __init__(self, every: float = EVERY_SECONDS) -> None:
        self.every = every
        self._noted: deque[tuple[Any, ...]] = deque()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._wake = threading.Event()

    def note(self, held: Any, outcome: Any, step: Any) -> None:
        """One recorded attempt (``attempt.Attempts``): its ``Held`` (with the slot it went out in),
        ``Outcome`` and ``Step``."""
        if not tracing.on():
            return
        if len(self._noted) >= MAX_PENDING:
            tracing.spans_dropped("queue_full", 1)
            return
        lane = held.lane
        sent_at = held.slot.sent_at if held.slot is not None else held.queued_at
        wait = sent_at - held.queued_at if held.queued_at else 0.0
        reason = None
        if wait >= NO_WAIT_SECONDS:
            reason = ("backlog" if held.receipt is None else "rate_limit" if lane.paused_until >= held.queued_at
                      else "window")
        self._noted.append((held.message, outcome, step.queue, step.exhausted, wait, reason))
        if self._thread is None:
            self._start()

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="attempt-spans", daemon=True)
                self._thread.start()
                tracing.before_shutdown(self.flush)

    def _run(self) -> None:
        while True:
            self._wake.wait(self.every)
            self._wake.clear()
            try:
                self.flush()
            except Exception:  # noqa: BLE001 - tracing stopped meanwhile, or a bad record: the next ones still go
                log.warning("making attempt spans failed", exc_info=True)

    def flush(self) -> None:
        """Make spans of everything noted so far."""
        with self._lock:
            while self._noted and tracing.on():
                make_span(*self._noted.popleft())


def next_step(status: str, queue: str | None, exhausted: bool) -> str:
    """Where the delivery goes after the attempt: ``delivered``, ``tier 5s``, ``primary`` (due within a
    second: the worker holds it), ``dead``, ``parked``, ``failed``."""
    if exhausted:
        return "dead"
    if queue is not None:  # a waiting tier (``<prefix>.wait.5s``, ``.wait.defer``), or back to the primary queue
        return f"tier {queue.rpartition('.wait.')[2]}" if ".wait." in queue else "primary"
    return status


def make_span(message: Any, outcome: Any, queue: str | None, exhausted: bool, wait: float,
              reason: str | None) -> None:
    """The span of one attempt, under the span its message names (a trace of its own if none), made
    from its record (``tracing.record_span``)."""
    fields = outcome.attempt_fields
    start_ns = _unix_ns(fields["started_at"])
    duration_ms = float(fields["duration_ms"] or 0.0)
    step = next_step(outcome.status, queue, exhausted)
    attributes = {
        "webhooks.tenant_id": message.tenant_id,
        "webhooks.endpoint_id": message.endpoint_id,
        "webhooks.delivery_id": message.delivery_id,
        "webhooks.event_id": message.event_id,
        "webhooks.event_type": message.event_type,
        "webhooks.attempt": message.attempt,
        "webhooks.trigger": message.trigger,
        "webhooks.lane_wait_ms": round(wait * 1000, 3),
        "webhooks.duration_ms": duration_ms,
        "webhooks.outcome": outcome.status,
        "webhooks.next": step,
    }
    if reason is not None:
        attributes["webhooks.lane_wait_reason"] = reason
    if fields.get("response_status") is not None:
        attributes["http.response.status_code"] = fields["response_status"]
    if fields.get("error_class"):
        attributes["error.type"] = fields["error_class"]
    for phase, ms in (outcome.phases or {}).items():  # dns, connect: when the call made a new connection
        attributes[f"webhooks.{phase}_ms"] = ms
    if message.not_before is not None:  # Retry-After: the worker held it (or a tier did) until then
        attributes["webhooks.not_before"] = datetime.fromtimestamp(message.not_before, timezone.utc).isoformat()
    if outcome.next_attempt_at is not None:
        attributes["webhooks.next_attempt_at"] = outcome.next_attempt_at.isoformat() + "Z"
    error = None if outcome.status == "delivered" else (outcome.last_error or step)
    tracing.record_span(f"attempt {message.attempt}", tracing.span_context_of(message.traceparent), start_ns,
                        start_ns + int(duration_ms * 1e6), attributes, kind=SpanKind.CLIENT, error=error)


def _unix_ns(moment: datetime) -> int:
    """Nanoseconds since the epoch of a UTC time (naive ones, as the database keeps them, are UTC)."""
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)
    return int(aware.timestamp() * 1_000_000) * 1000


#: The worker's recorder (``attempt.Attempts`` notes each recorded attempt here).
recorder = AttemptSpans()
