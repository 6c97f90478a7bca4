"""The worker process: one asyncio event loop that consumes the primary queue and delivers.

Messages arrive from a ``broker.Session`` (pika's ``AsyncioConnection``) into their
endpoint's lane (``lanes``); whenever a lane's adaptive window (``window``) has room,
the next message is handed out, tenant by tenant, and ``attempt.Attempts`` claims,
calls, records and acks it. Thousands of deliveries can be in flight at once: they
are bounded by the endpoints' windows and the process's share of ``WORKER_PREFETCH``
for calls in flight (``budget``), not by threads. Database work runs in batches on a
few threads (``batcher``), never on the loop. A backlog beyond what memory should hold
moves to the database (``spill``), and the housekeeping (``upkeep``) runs once a second.

The first SIGTERM (or Ctrl-C) stops consuming, gives back the messages not yet
started and lets the deliveries in flight finish, record and ack; a second one exits
at once (unacked messages return to the queue). A lost broker connection is
reconnected with backoff (to any node of ``AMQP_URL``); a database outage is waited
out with the messages unacked. ``python -m webhooks.worker`` runs it.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Sequence

import pika
import uvloop

from webhooks import metrics
from webhooks.messaging.brokers import broker_parameters
from webhooks.delivery.claims import claim_many
from webhooks.config import Settings
from webhooks.delivery.attempt import LEASE_MARGIN_SECONDS, Attempts
from webhooks.delivery.batcher import Batcher
from webhooks.delivery.broker import MissingQueue, Session, SessionClosed
from webhooks.delivery.budget import Budget
from webhooks.delivery.decide import wait_queue_for
from webhooks.delivery.lane import Held, Lane
from webhooks.delivery.lanes import CLAIMS_AHEAD, QUICK_BUDGET, Lanes
from webhooks.delivery.pauses import Backoff
from webhooks.delivery.receipt import Receipt
from webhooks.delivery.broker_link import REQUEUE_PAUSE_SECONDS, BrokerLink
from webhooks.delivery.database_work import DatabaseWork
from webhooks.delivery.runtime import Runtime
from webhooks.delivery.tasks import TaskSet
from webhooks.delivery.destinations import Destinations
from webhooks.delivery.spill import Spiller
from webhooks.delivery.upkeep import Upkeep
from webhooks.delivery.window import Signal
from webhooks.messaging.messages import DeliveryMessage, PoisonMessage
from webhooks.delivery.netguard import TargetPolicy
from webhooks.messaging.outbox import mark_enqueued
from webhooks.delivery.records import record_many
from webhooks.messaging.topology import DEFER_MS

log = logging.getLogger(__name__)

#: Threads for the delivery path's batches: claims, records and marks, one batch of each at
#: a time, plus a tenant's lone claim beside a running claim batch (``Batcher``'s express),
#: so each always finds a thread. Other database work (moving backlogs to the
#: database and back, housekeeping) has threads of its own (``SIDE_THREADS``): with a
#: hundred lanes fetching their backlogs back at once, it once held every thread for
#: seconds while claims and records waited behind it, and nothing was sent meanwhile.
BATCH_THREADS = 4
SIDE_THREADS = 2

#: Claims per transaction: half of what one tenant may have handed out ahead of its claims
#: (``lanes.CLAIMS_AHEAD``). Work waits in its lane, where tenants take turns, not in a queue
#: for the database: a tenant's message handed out waits for at most the batch running and
#: its own, another tenant's lone message is claimed at once beside it (or goes first into
#: the next batch: batches take tenants in turns), and the burst of calls a finished batch
#: sets off stays short enough for the loop to turn around.
CLAIM_BATCH = CLAIMS_AHEAD // 2

#: Giving up on a broker node that does not answer (seconds).
CONNECT_TIMEOUT_SECONDS = 10.0

#: A message due within this many seconds is attempted now.
NOT_BEFORE_SLACK_SECONDS = 0.05


def open_files_limit() -> int | None:
    """This process's limit on open files (None: unlimited); ``webhooks.worker`` raises it at start."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else soft


def _mark_each(messages: Sequence[DeliveryMessage]) -> list[None]:
    mark_enqueued(messages)
    return [None] * len(messages)


def _tenant_of(message: DeliveryMessage) -> str:
    return message.tenant_id


def _tenant_of_record(item: tuple[DeliveryMessage, Any]) -> str:
    return item[0].tenant_id


class Engine:
    """One worker process's delivery engine. ``run()`` blocks; ``stop()`` may be called from any thread."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.topology = settings.topology
        self.requeue_pause = REQUEUE_PAUSE_SECONDS
        #: Set while the engine consumes (tests wait for it).
        self.consuming = threading.Event()
        self.rt: Runtime | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_asked = threading.Event()
        self._pump_scheduled = False
        #: Messages waiting in memory for their ``not_before``: receipt -> timer.
        self._timers: dict[Receipt, asyncio.TimerHandle] = {}

    # -- the outside ------------------------------------------------------------------------------

    def run(self) -> int:
        """Consume and deliver until stopped; the exit status (2: the queues are missing).

        The loop is uvloop's: its thread spent 4-6 % less CPU on the same deliveries than on
        asyncio's own loop (``bench/RESULTS.md``, 2026-11-26 07:37–09:45 UTC, commit 0d83837)."""
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(self._main())

    def stop(self) -> None:
        """Stop taking messages; deliveries in flight finish, are recorded and acked."""
        self._stop_asked.set()
        loop, rt = self._loop, self.rt
        if loop is not None and rt is not None and not loop.is_closed():
            loop.call_soon_threadsafe(rt.stopping.set)

    # -- lifetime ---------------------------------------------------------------------------------

    async def _main(self) -> int:
        settings = self.settings
        executor = ThreadPoolExecutor(SIDE_THREADS, thread_name_prefix="db")
        batches = ThreadPoolExecutor(BATCH_THREADS, thread_name_prefix="db-batch")
        destinations = Destinations.open(
            timeout=settings.delivery_timeout,
            policy=TargetPolicy.from_strings(settings.allow_private_targets, settings.allowed_target_networks),
            smtp_url=settings.smtp_url, templates_ttl=settings.event_types_cache,
        )
        lease = settings.delivery_timeout + LEASE_MARGIN_SECONDS
        self.budget = budget = Budget.of(settings.worker_prefetch, open_files_limit())
        stopping, tasks = asyncio.Event(), TaskSet()
        rt = Runtime(
            settings=settings,
            lanes=Lanes(settings.endpoint_max_in_flight, QUICK_BUDGET, max_under_way=budget.in_flight),
            destinations=destinations,
            broker=BrokerLink(requeue_pause=self.requeue_pause),
            db=DatabaseWork(
                executor=executor,
                claims=Batcher(partial(claim_many, lease_seconds=lease), batches, CLAIM_BATCH, share=_tenant_of,
                               express=True),
                records=Batcher(partial(record_many, offline_after=settings.offline_after_failures), batches,
                                share=_tenant_of_record),
                marks=Batcher(_mark_each, batches),
                stopping=stopping,
                tasks=tasks,
            ),
            tasks=tasks,
            stopping=stopping,
            wake=self._wake,
        )
        self.rt, self._loop = rt, asyncio.get_running_loop()
        if self._stop_asked.is_set():
            rt.stopping.set()
        self.attempts = Attempts(rt)
        self.spiller = Spiller(rt, budget.hold, lendable=budget.in_flight)
        self.upkeep = Upkeep(rt, self.spiller, settings.endpoint_max_in_flight)
        chores = [asyncio.create_task(self.upkeep.run()), asyncio.create_task(self.spiller.scan_orphans()),
                  asyncio.create_task(rt.lag.measure(rt.stopping))]
        try:
            return await self._serve()
        finally:
            rt.stopping.set()
            await asyncio.gather(*chores, return_exceptions=True)
            await rt.tasks.finish()
            await self.upkeep.forget()
            await destinations.close()
            executor.shutdown(wait=True)
            batches.shutdown(wait=True)
            self.consuming.clear()
            log.info("worker stopped")

    async def _serve(self) -> int:
        """Broker sessions one after another (reconnecting with backoff) until stopped."""
        rt = self.rt
        assert rt is not None
        backoff, number = Backoff(), 0
        while not rt.stopping.is_set():
            number += 1
            session = Session(number)
            try:
                await session.open(broker_parameters(self.settings.amqp_url, CONNECT_TIMEOUT_SECONDS / 2),
                                   CONNECT_TIMEOUT_SECONDS)
                await session.check_queues(self.topology.all_queues())
                rt.broker.session = session
                await session.consume(self.topology.primary, self.settings.worker_prefetch, self._on_message,
                                      bulk=self.topology.bulk)
                log.info("worker consuming %s (prefetch %d: up to %d calls in flight, %d messages waiting in memory; "
                         "up to %d calls in flight per endpoint)", self.topology.primary, self.settings.worker_prefetch,
                         self.budget.in_flight, self.budget.hold, rt.lanes.ceiling)
                self.consuming.set()
                backoff.reset()
                stop = asyncio.ensure_future(rt.stopping.wait())
                await asyncio.wait([stop, session.closed], return_when=asyncio.FIRST_COMPLETED)
                stop.cancel()
                if rt.stopping.is_set() and session.is_open:
                    await self._drain(session)
                    return 0
                raise session.closed.result() if session.closed.done() else SessionClosed("closed")
            except MissingQueue as error:
                log.error("a queue of the ladder is missing (%s): run `python rabbit_setup.py`", error)
                return 2
            except (SessionClosed, pika.exceptions.AMQPError, OSError) as error:
                if rt.stopping.is_set():
                    return 0
                log.warning("broker connection lost: %s; reconnecting in %.1fs", error, backoff.seconds)
            finally:
                self.consuming.clear()
                self._forget_session(session)
                await session.close()
            await backoff.wait(rt.stopping)
        return 0

    async def _drain(self, session: Session) -> None:
        """The first stop signal: take nothing more, give back what has not started, finish the rest."""
        rt = self.rt
        assert rt is not None
        await session.cancel()
        rt.give_back(rt.lanes.drain())
        for receipt, timer in list(self._timers.items()):
            timer.cancel()
            receipt.requeue()
        self._timers.clear()
        if rt.tasks:
            log.info("finishing %d deliveries in flight", len(rt.tasks))
            await rt.tasks.finish()

    def _forget_session(self, session: Session) -> None:
        """The session is over: its messages are back in the queue (the broker requeued them), and
        those taken back from the database go back there."""
        rt = self.rt
        assert rt is not None
        rt.give_back([held for held in rt.lanes.drain() if held.receipt is None])
        for receipt in [receipt for receipt in self._timers if receipt.session is session]:
            self._timers.pop(receipt).cancel()

    # -- messages in ------------------------------------------------------------------------------

    def _on_message(self, tag: int, properties: pika.BasicProperties, body: bytes) -> None:
        rt = self.rt
        assert rt is not None and rt.broker.session is not None
        receipt = Receipt(rt.broker.session, tag)
        if rt.stopping.is_set():
            receipt.requeue()  # arrived between the stop and the broker's cancel-ok
            return
        headers = dict(properties.headers or {})
        try:
            message = DeliveryMessage.decode(body, headers)
        except PoisonMessage as error:
            log.error("dead-lettered poison message: %s", error)
            rt.tasks.spawn(rt.broker.move(receipt, self.topology.dead, body, {**headers, "error": str(error)}))
            return
        wait = (message.not_before or 0.0) - time.time()
        if wait > NOT_BEFORE_SLACK_SECONDS:
            if wait * 1000 < DEFER_MS:
                # Due within a second (Retry-After, a resend keeping its place): wait here.
                self._timers[receipt] = rt.loop.call_later(wait, self._admit_due, message, receipt)
            else:
                # Back to a waiting tier, without an attempt: the longest that does not overshoot.
                queue = wait_queue_for(wait * 1000, self.settings.ladder, self.topology)
                rt.tasks.spawn(rt.broker.move(receipt, queue, body, headers))
            return
        self._admit(message, receipt)

    def _admit_due(self, message: DeliveryMessage, receipt: Receipt) -> None:
        self._timers.pop(receipt, None)
        self._admit(message, receipt)

    def _admit(self, message: DeliveryMessage, receipt: Receipt) -> None:
        rt = self.rt
        assert rt is not None
        if rt.broker.session is not receipt.session or not receipt.session.is_open:
            return  # its session is gone: the broker has it again
        rt.lanes.add(message, receipt, rt.loop.time())
        self.spiller.check()
        self._wake()

    # -- work out ---------------------------------------------------------------------------------

    def _wake(self) -> None:
        if not self._pump_scheduled and self._loop is not None:
            self._pump_scheduled = True
            self._loop.call_soon(self._pump)

    def _pump(self) -> None:
        """Hand out every message whose lane can send now, tenant by tenant (``Lanes.next_ready``
        keeps each tenant within its quick budget and its claims ahead)."""
        self._pump_scheduled = False
        rt = self.rt
        assert rt is not None
        if rt.stopping.is_set() and rt.broker.session is None:
            return
        now = rt.loop.time()
        while (held := rt.lanes.next_ready(now)) is not None:
            self._watch(held.lane)
            rt.tasks.spawn(self._deliver(held))

    async def _deliver(self, held: Held) -> None:
        """One handed-out message, start to end. Whatever happens (an unexpected error included),
        its window slot is released and, if the broker's message was neither acked nor moved,
        it goes back where it came from: a bug costs a repeated attempt, never a slot for good."""
        rt, slot = self.rt, held.slot
        assert rt is not None
        try:
            await self.attempts.handle(held)
        except Exception:
            if held.receipt is None or not held.receipt.settled:
                rt.give_back([held])
            raise
        finally:
            self.attempts.release(slot, Signal.NEUTRAL)
            rt.lanes.settled(held, rt.loop.time())
            self._wake()
            self.spiller.after_settled(held)

    def _watch(self, lane: Lane) -> None:
        """Make sure someone looks at ``lane``'s oldest call once it is late."""
        slow_after = lane.window.slow_after() if self.rt is not None else None
        if lane.watch is None and slow_after is not None and self._loop is not None:
            lane.watch = self._loop.call_later(slow_after, self._check_late, lane)

    def _check_late(self, lane: Lane) -> None:
        """A call far slower than the endpoint's baseline cuts its window before it even returns."""
        lane.watch = None
        if self.rt is None or self._loop is None:
            return
        now = self._loop.time()
        again, cut = lane.check_late(now, self.rt.lag.allowance(now))
        if cut:
            metrics.WINDOW_CUTS.labels("latency").inc()
        if again is not None:
            lane.watch = self._loop.call_later(again - now, self._check_late, lane)
