"""The worker: one thread owns the pika connection, a bounded pool of threads delivers.

Delivery threads never touch the consuming connection (pika is not thread-safe): they
hand acks back with ``connection.add_callback_threadsafe``, so the connection thread is
never blocked by a slow endpoint or a publish, and heartbeats keep flowing. Acks are
queued and sent together, only after the attempt's record is committed; the threads'
claims and records are batched into shared transactions, and their publishes (the next
tier, the defer queue, the dead letters) into shared batches of pipelined confirms on a
connection of their own (``group_commit``, ``publisher.Publisher``). The first SIGTERM stops
consuming and lets in-flight deliveries finish; a second exits at once (unacked
messages return to the queue). A lost broker or database is waited out, not fatal.

Run it with ``python -m webhooks.worker``.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Callable, Sequence

import peewee
import pika
import pika.exceptions
from pika.adapters.blocking_connection import BlockingChannel

from webhooks import db, logs
from webhooks.config import Settings
from webhooks.delivery import Processor
from webhooks.group_commit import GroupCommit
from webhooks.http_client import Sender
from webhooks.netguard import TargetPolicy
from webhooks.publisher import Outgoing, Publisher, connection_parameters
from webhooks.scheduler import EndpointScheduler

log = logging.getLogger(__name__)

#: How long the connection thread waits for socket events before checking for a stop.
POLL_SECONDS = 0.2

#: A message whose onward publish failed returns to the queue after this pause (seconds),
#: so a broker refusing publishes does not spin it into the dead-letter queue at once.
REQUEUE_PAUSE_SECONDS = 1.0

#: Unacknowledged messages per delivery thread: room for several endpoints' lines.
PREFETCH_FACTOR = 4

#: Messages of one endpoint waiting in memory, per allowed in-flight call.
HOLD_FACTOR = 2

#: Longest pause between attempts to reach a broker or database that is down.
MAX_BACKOFF_SECONDS = 10.0


class Stopping(Exception):
    """Raised in a delivery thread waiting on the database when the worker is stopping."""


class Worker:
    def __init__(self, settings: Settings, processor: Processor | None = None) -> None:
        self.settings = settings
        self.topology = settings.topology
        self.threads = settings.worker_threads
        self.processor = processor or Processor(
            settings,
            Sender(
                timeout=settings.delivery_timeout,
                policy=TargetPolicy.from_strings(settings.allow_private_targets, settings.allowed_target_networks),
                max_connections=self.threads * 2,
            ),
        )
        self.executor = ThreadPoolExecutor(self.threads, thread_name_prefix="delivery")
        self.scheduler = EndpointScheduler(
            self.executor, settings.endpoint_max_in_flight, settings.endpoint_max_in_flight * HOLD_FACTOR
        )
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._in_flight = 0
        #: Per connection: acks (channel, delivery tag, ack?) waiting for its thread, and
        #: the connections with a flush of them already scheduled.
        self._settlements: dict[pika.BlockingConnection, list[tuple[BlockingChannel, int, bool]]] = {}
        self._flush_scheduled: set[pika.BlockingConnection] = set()
        self._connection: pika.BlockingConnection | None = None
        #: Onward publishes of every delivery thread, batched with pipelined confirms.
        self.publisher = Publisher(settings.amqp_url, settings.publish_timeout)
        self._publish_one: GroupCommit[Outgoing, bool] = GroupCommit(self._publish_batch)
        self.requeue_pause = REQUEUE_PAUSE_SECONDS

    # -- the connection thread ------------------------------------------------------

    def run(self) -> int:
        """Consume until stopped; reconnect with backoff when the broker goes away."""
        backoff = 0.5
        while not self._stop.is_set():
            try:
                self._consume()
                backoff = 0.5
            except pika.exceptions.ChannelClosedByBroker as error:
                if error.reply_code == 404:
                    log.error("a queue of the ladder is missing (%s): run `python rabbit_setup.py`", error.reply_text)
                    return 2
                log.warning("channel closed by broker: %s; reconnecting in %.1fs", error, backoff)
            except (pika.exceptions.AMQPError, OSError) as error:
                log.warning("broker connection lost: %r; reconnecting in %.1fs", error, backoff)
            self._stop.wait(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
        self.executor.shutdown(wait=True)
        self.publisher.close()
        log.info("worker stopped")
        return 0

    def _consume(self) -> None:
        params = connection_parameters(self.settings.amqp_url, timeout=5.0)
        params.heartbeat = 30
        connection = pika.BlockingConnection(params)
        self._connection = connection
        try:
            channel = connection.channel()
            self.topology.check(channel)
            channel.basic_qos(prefetch_count=self.threads * PREFETCH_FACTOR)
            on_message = partial(self._on_message, connection)
            tag = channel.basic_consume(self.topology.primary, on_message)
            log.info("worker consuming %s with %d delivery threads", self.topology.primary, self.threads)
            cancelled = False
            while True:
                connection.process_data_events(time_limit=POLL_SECONDS)
                if self._stop.is_set() and not cancelled:
                    channel.basic_cancel(tag)  # no new messages; in-flight ones finish below
                    cancelled = True
                if cancelled and self.in_flight == 0:
                    return
        finally:
            self._connection = None
            self._drop_settlements(connection)
            if connection.is_open:
                try:
                    connection.close()
                except Exception:  # noqa: BLE001 - closing a connection that is already broken
                    log.debug("error closing connection", exc_info=True)

    def _on_message(
        self,
        connection: pika.BlockingConnection,
        channel: BlockingChannel,
        method: Any,
        properties: pika.BasicProperties,
        body: bytes,
    ) -> None:
        with self._lock:
            self._in_flight += 1
        headers = dict(properties.headers or {})
        work = partial(self._work, connection, channel, method.delivery_tag, body, headers)
        if not self.scheduler.submit(endpoint_of(body), work):
            # This endpoint's line in this process is full: back through the defer queue.
            self.executor.submit(partial(work, overflow=True))

    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    def stop(self) -> None:
        """Stop taking messages; in-flight deliveries finish and are acked."""
        self._stop.set()

    # -- delivery threads ---------------------------------------------------------------

    def _work(
        self,
        connection: pika.BlockingConnection,
        channel: BlockingChannel,
        tag: int,
        body: bytes,
        headers: dict[str, Any],
        overflow: bool = False,
    ) -> None:
        settled = False
        try:
            if overflow:
                handled = self.processor.overflow(body, headers)
            else:
                handled = self._until_database_answers(lambda: self.processor.handle(body, headers))
            ack = handled.ack
            if handled.publish:
                published = all([self._publish_one(outgoing) for outgoing in handled.publish])
                if not published:
                    # The message goes back to the queue rather than vanish: a deferred one
                    # exists nowhere else. (A next attempt is also in the outbox: the relay
                    # republishes it, and this copy is dropped as recorded elsewhere.)
                    log.warning("publish not confirmed; the message returns to the queue")
                    self._stop.wait(self.requeue_pause)
                    ack = False
                elif handled.after_publish is not None:
                    self._until_database_answers(handled.after_publish)
            settled = self._settle(connection, channel, tag, ack)
        except Stopping:
            log.info("stopping before the work was recorded; the message returns to the queue")
        except Exception:  # noqa: BLE001 - a bug must not kill the thread; the message is requeued
            log.exception("unexpected error handling a message; requeueing it")
            settled = self._settle(connection, channel, tag, False)
        finally:
            db.release_connection()
            if not settled:
                self._finished(1)

    def _settle(self, connection: pika.BlockingConnection, channel: BlockingChannel, tag: int, ack: bool) -> bool:
        """Queue the ack (or requeue) for the connection thread, which sends all queued at once.

        The delivery thread does not wait for it: the work is recorded, and a message
        whose ack is lost with the connection is redelivered and found stale.
        """
        with self._lock:
            self._settlements.setdefault(connection, []).append((channel, tag, ack))
            if connection in self._flush_scheduled:
                return True
            self._flush_scheduled.add(connection)
        try:
            connection.add_callback_threadsafe(partial(self._flush_settlements, connection))
        except (pika.exceptions.AMQPError, OSError) as error:
            log.warning("cannot hand acks to the connection thread: %r", error)
            self._drop_settlements(connection)
        return True

    def _flush_settlements(self, connection: pika.BlockingConnection) -> None:
        """On the connection thread: send every ack and requeue queued for this connection."""
        with self._lock:
            settlements = self._settlements.pop(connection, [])
            self._flush_scheduled.discard(connection)
        try:
            for channel, tag, ack in settlements:
                _settle(channel, tag, ack)
        except (pika.exceptions.AMQPError, OSError) as error:
            log.warning("acks not sent (the broker requeues those messages): %r", error)
        finally:
            self._finished(len(settlements))

    def _drop_settlements(self, connection: pika.BlockingConnection) -> None:
        """The connection is gone: its unsent acks are moot (the broker requeued those messages)."""
        with self._lock:
            dropped = len(self._settlements.pop(connection, []))
            self._flush_scheduled.discard(connection)
        self._finished(dropped)

    def _finished(self, count: int) -> None:
        with self._lock:
            self._in_flight -= count

    def _until_database_answers(self, operation: Callable[[], Any]) -> Any:
        """Run ``operation``, waiting out a database outage (the message stays unacked meanwhile)."""
        backoff = 0.5
        while True:
            try:
                return operation()
            except (peewee.OperationalError, peewee.InterfaceError) as error:
                if self._stop.is_set():
                    raise Stopping from error
                log.warning("database unavailable (%s); retrying in %.1fs", error, backoff)
                db.reset_connection()
                time.sleep(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)

    def _publish_batch(self, messages: Sequence[Outgoing]) -> list[bool]:
        """Publish the delivery threads' messages together; which of them were confirmed."""
        confirmed = self.publisher.publish(messages)
        return [index < confirmed for index in range(len(messages))]


def endpoint_of(body: bytes) -> str | None:
    """The endpoint a message is for (None for a malformed one: the processor deals with it)."""
    try:
        value = json.loads(body).get("endpoint_id")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def _settle(channel: BlockingChannel, tag: int, ack: bool) -> bool:
    """Ack (or requeue) on the connection thread; a tag of a dead channel is already requeued."""
    if not channel.is_open:
        return False
    if ack:
        channel.basic_ack(tag)
    else:
        channel.basic_nack(tag, requeue=True)
    return True


def main() -> int:
    logs.configure()
    settings = Settings.from_env()
    db.init_database(settings.database_url)
    worker = Worker(settings)
    signals = {"count": 0}

    def on_signal(signum: int, _frame: Any) -> None:
        signals["count"] += 1
        if signals["count"] > 1:
            log.warning("second signal: exiting now; unacked messages return to the queue")
            os._exit(1)
        log.info("signal %d: finishing in-flight deliveries (send again to exit now)", signum)
        worker.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return worker.run()


if __name__ == "__main__":
    sys.exit(main())
