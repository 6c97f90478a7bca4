"""The web process's background publishing: accepted events go to the broker after the response.

``init_app`` gives the app one ``Publisher`` (connected on first use, in each forked
gunicorn worker) and one ``BackgroundEnqueuer`` that publishes what ingestion committed.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from typing import Sequence

from flask import Flask

from webhooks.messaging.messages import DeliveryMessage
from webhooks.messaging.outbox import mark_enqueued, publish_messages
from webhooks.messaging.publisher import Publisher
from webhooks.messaging.shares import RecentShares
from webhooks.messaging.topology import Topology
from webhooks.turns import TurnQueue, count_down
from webhooks.observability import tracing
from webhooks.storage.db import release_connection

log = logging.getLogger(__name__)


def init_app(app: Flask, amqp_url: str, publish_timeout: float, topology: Topology) -> None:
    """Give the app its publisher and the background enqueuer that publishes accepted events."""
    publisher = Publisher(amqp_url, publish_timeout)
    app.extensions["webhooks.publisher"] = publisher
    app.extensions["webhooks.enqueuer"] = BackgroundEnqueuer(
        publisher, topology, express_publisher=Publisher(amqp_url, publish_timeout)
    )


#: The thread marks what the broker confirmed at most this often (seconds), in one statement.
MARK_EVERY_SECONDS = 0.2

#: The longest a round waits for an express publish of one of its tenants to be confirmed (seconds).
EXPRESS_WAIT_SECONDS = 10.0


def _tenant_of(message: DeliveryMessage) -> str:
    return message.tenant_id


class BackgroundEnqueuer:
    """Publishes after the response, from one thread per process, in batches.

    ``POST /v1/events`` answers as soon as the event is committed; this thread then
    publishes (with confirms) and marks what was confirmed. Whatever it cannot publish,
    or had not published or marked when the process died, the relay publishes once overdue
    (a duplicate at worst: the worker's claim drops it).

    The mark waits: what the broker confirmed is marked at most every ``mark_every``
    seconds (0.2), in one statement, rather than after every round. At 200 events/s each
    web process had made about a hundred one-row marks a second; now it makes five, and by
    then most of their deliveries have been attempted, so the mark finds nothing left to
    write (its ``attempts`` guard). The relay waits ``RELAY_GRACE`` (10 s) before it
    republishes an unmarked delivery, far longer than a mark waits.

    Messages wait in a ``webhooks.turns.TurnQueue`` (one queue per tenant) and each batch takes the
    tenants in turns over everything waiting, so one tenant's event goes out in the next
    batch, near its front, even when another tenant's flood has thousands queued before it.

    Publishes start at most once every ``spacing`` seconds: a message that comes after a
    quieter spell goes out at once, and under load what arrives within ``spacing`` of the
    previous publish waits for the rest of it and goes out with it, so that one publish
    (all confirms awaited together) and one mark serve several events. The spacing is short
    (5 ms) so that it bounds how many publishes a busy process makes (about 200 a second)
    without adding a wait worth counting to an event's way: at 200 events/s a 25 ms linger
    had been most of the time from the 202 to the worker. It keeps its database connection
    while busy and returns it to the pool after ``release_after`` idle seconds.

    With an ``express_publisher`` (a second connection), a tenant's request does not wait
    for another tenant's round either: while other tenants' messages are being published or
    marked, or wait for the next round, the messages of a tenant with nothing waiting for the
    round go to a second thread, which publishes everything queued for it (in turns by
    tenant, as the rounds do) and marks it at once. Under a flood of 200-event batches a
    round takes tens of milliseconds, and up to hundreds while the process's request threads
    hold the GIL; a mark of a flood's confirmed messages waits for the rows the workers are
    claiming, and took up to 1.6 s in the flood benchmark, with a lone tenant's event queued
    behind it. A tenant over its share (``shares``: the flood) never takes the express
    thread, so what waits there is other tenants' few messages. A tenant's messages reach the
    broker in the order they were submitted: while some of its messages wait for the express
    thread its next ones queue there too, behind them; while some wait for the round, the
    next ones queue for the round, and the round waits for the tenant's express confirms first.
    (Until issue 36's flood benchmark the express thread took one request at a time and a
    tenant whose previous event was still under way there queued for the round: one event
    every 100 ms beside a flood then waited up to 1.7 s for the flood's rounds.)

    A tenant that submitted far more than its share over the last second (``shares``) has its
    messages published to the bulk queue rather than the primary one, whichever thread
    publishes them: the workers read the two apart, so another tenant's message never waits
    behind the flood's in the stream a worker was handed.
    """

    def __init__(self, publisher: Publisher, topology: Topology, batch: int = 500, spacing: float = 0.005,
                 release_after: float = 1.0, express_publisher: Publisher | None = None,
                 mark_every: float = MARK_EVERY_SECONDS, shares: RecentShares | None = None) -> None:
        self.publisher, self.topology, self.batch = publisher, topology, batch
        self.spacing, self.release_after, self.mark_every = spacing, release_after, mark_every
        self.express_publisher = express_publisher
        self.shares = shares or RecentShares()
        self._last_batch_start = float("-inf")
        self._queue: TurnQueue[DeliveryMessage] = TurnQueue(_tenant_of)
        self._express: TurnQueue[DeliveryMessage] = TurnQueue(_tenant_of)
        self._pid = 0
        self._lock = threading.Lock()
        self._done = threading.Condition(threading.Lock())
        self._unhandled = 0  # submitted, not yet published (or given up on)
        self._unmarked = 0  # confirmed by the broker, not yet marked (or given up on)
        #: The thread's own: what its rounds published and the broker confirmed, to mark; its last mark.
        self._confirmed: list[DeliveryMessage] = []
        self._last_mark = float("-inf")
        #: Guarded by ``_done``: each tenant's messages queued for the round and not handled yet, and
        #: those queued for the express thread and not published yet; is the round thread publishing
        #: or marking (a message queued now would wait for it).
        self._round_pending: Counter[str] = Counter()
        self._express_pending: Counter[str] = Counter()
        self._round_busy = False

    def submit(self, messages: Sequence[DeliveryMessage]) -> None:
        if not messages:
            return
        self._ensure_thread()
        tenants = Counter(message.tenant_id for message in messages)
        self.shares.add(tenants)
        flooding = bool(self.shares.over(tenants))
        flood_here = flooding or self.shares.anyone_over()
        with self._done:
            express = self._takes_express(tenants, flooding, flood_here)
            self._unhandled += len(messages)
            (self._express_pending if express else self._round_pending).update(tenants)
        (self._express if express else self._queue).put(messages)

    def _takes_express(self, tenants: Counter[str], flooding: bool, flood_here: bool) -> bool:
        """Do these messages go to the express thread? (Called holding ``_done``.) Behind the
        tenants' own messages still waiting for it, always (they keep their order); otherwise,
        for tenants with nothing waiting for the round and none over its share, while another
        tenant floods this process (``flood_here``: an idle round thread would take the flood's
        next batch with them, hundreds of messages in one publish) or behind others' work (a
        round being published or marked, or messages queued for the next one)."""
        if self.express_publisher is None or any(self._round_pending[tenant] for tenant in tenants):
            return False
        if any(self._express_pending[tenant] for tenant in tenants):
            return True
        return not flooding and (flood_here or self._unhandled > 0 or self._round_busy)

    def _handled(self, messages: Sequence[DeliveryMessage], express: bool = False) -> None:
        with self._done:
            self._unhandled -= len(messages)
            if not express:
                for message in messages:
                    count_down(self._round_pending, message.tenant_id)
            if self._unhandled <= 0:
                self._done.notify_all()

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Block until everything submitted so far was published and marked, and the round that
        did it has ended (tests, shutdown)."""
        with self._done:
            return self._done.wait_for(
                lambda: self._unhandled == 0 and self._unmarked == 0 and not self._round_busy, timeout)

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._pid != os.getpid():  # a thread does not survive a fork: start ours
                self._pid = os.getpid()
                self._queue = TurnQueue(_tenant_of)  # whatever the parent had queued is the parent's
                self._express = TurnQueue(_tenant_of)
                with self._done:
                    self._unhandled, self._unmarked = 0, 0
                    self._round_pending, self._express_pending = Counter(), Counter()
                    self._round_busy = False
                self._confirmed, self._last_mark = [], float("-inf")
                threading.Thread(target=self._run, name="enqueuer", daemon=True).start()
                if self.express_publisher is not None:
                    threading.Thread(target=self._run_express, name="enqueuer-express", daemon=True).start()

    def _next_batch(self) -> list[DeliveryMessage]:
        """Up to ``batch`` messages, tenant by tenant (``TurnQueue``): what is queued, and what
        arrives before ``spacing`` has passed since the previous publish started. Empty when
        nothing came before a mark fell due."""
        mark_due = self._last_mark + self.mark_every - time.monotonic() if self._confirmed else None
        if not self._queue.wait(self.release_after if mark_due is None else max(mark_due, 0.0)):
            if mark_due is not None:
                return []
            release_connection()  # idle: give the pooled connection back, then sleep until work comes
            self._queue.wait(None)
        left = self._last_batch_start + self.spacing - time.monotonic()
        if left > 0:
            self._queue.wait(left, at_least=self.batch)
        return self._queue.take(self.batch)

    def _run(self) -> None:
        while True:
            messages = self._next_batch()
            self._set_round_busy(True)
            try:
                if messages:
                    self._after_express_of(messages)
                    self._last_batch_start = time.monotonic()
                    confirmed = self._publish_only(self.publisher, messages)
                    self._confirmed += confirmed
                    with self._done:
                        self._unmarked += len(confirmed)
                    self._handled(messages)
                if self._confirmed and time.monotonic() - self._last_mark >= self.mark_every:
                    self._mark()
            finally:
                self._set_round_busy(False)

    def _set_round_busy(self, busy: bool) -> None:
        with self._done:
            self._round_busy = busy
            if not busy:
                self._done.notify_all()

    def _after_express_of(self, messages: list[DeliveryMessage]) -> None:
        """Wait until the broker has confirmed an express publish of these messages' tenants.

        A tenant's message that comes while its express publish is under way queues for the
        round; published before the express one was confirmed, it could reach the queue first.
        An express publish ends within its publisher's timeouts, failed or not; should one hang
        longer than ``EXPRESS_WAIT_SECONDS``, the round goes out rather than wait with the others.
        """
        tenants = {message.tenant_id for message in messages}
        with self._done:
            self._done.wait_for(lambda: not any(self._express_pending[tenant] for tenant in tenants),
                                EXPRESS_WAIT_SECONDS)

    def _publish_only(self, publisher: Publisher, messages: list[DeliveryMessage]) -> list[DeliveryMessage]:
        """Publish; the messages the broker confirmed (they are marked later)."""
        started, confirmed = tracing.now_ns(), 0
        try:
            bulk = self.shares.over(message.tenant_id for message in messages)
            confirmed = publish_messages(publisher, self.topology, messages, bulk)
        except Exception:  # noqa: BLE001 - the relay covers anything left unmarked
            log.exception("background publish of %d messages failed; the relay will publish them", len(messages))
        if tracing.on():
            tracing.publish_spans([message.traceparent for message in messages], confirmed, self.topology.primary,
                                  started)
        return messages[:confirmed]

    def _mark(self) -> None:
        """Mark every message confirmed since the last mark, in one statement."""
        confirmed, self._confirmed = self._confirmed, []
        self._last_mark = time.monotonic()
        try:
            _mark_now(confirmed)
        finally:
            with self._done:
                self._unmarked -= len(confirmed)
                if self._unhandled <= 0 and self._unmarked <= 0:
                    self._done.notify_all()

    def _run_express(self) -> None:
        assert self.express_publisher is not None
        while True:
            if not self._express.wait(self.release_after):
                release_connection()  # idle: give the pooled connection back, then sleep until work comes
                self._express.wait(None)
            messages = self._express.take(self.batch)
            confirmed = self._publish_only(self.express_publisher, messages)
            with self._done:
                for message in messages:
                    count_down(self._express_pending, message.tenant_id)
                self._done.notify_all()
            if confirmed:
                _mark_now(confirmed)
            self._handled(messages, express=True)


def _mark_now(confirmed: list[DeliveryMessage]) -> None:
    """Mark published messages; a failure is logged (the relay publishes them again: duplicates, no loss)."""
    try:
        mark_enqueued(confirmed)
    except Exception:  # noqa: BLE001 - unmarked, they are published again by the relay
        log.exception("marking %d published messages failed; the relay will publish them again", len(confirmed))
