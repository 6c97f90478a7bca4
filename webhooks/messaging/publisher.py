"""Publishing delivery messages: persistent, ``mandatory`` and confirmed, or an error.

Everything goes through the default exchange with the queue name as routing key, so
an unroutable publish (a missing queue) comes back as a failure instead of vanishing.
``Publisher`` is the bounded, fork-safe publisher of the web and clock processes (the worker
publishes on its own broker session, ``delivery.broker``):
when the broker is down it fails fast and the outbox relay takes over.

``Publisher.publish`` sends a whole batch and then waits for all of its confirms
together (pipelined publisher confirms, as in pika's asynchronous publisher example),
instead of one round trip per message as ``BlockingChannel`` in confirm mode does. It
drives a ``SelectConnection`` from the calling thread, the way ``BlockingConnection``
drives its own, only while a batch is in flight. A message counts as published only
once the broker acked it and did not return it as unroutable; the result is the
length of the confirmed prefix, in order, so callers mark exactly those.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Callable, Sequence

import pika
import pika.exceptions
import pika.frame
import pika.spec
from pika.adapters import select_connection
from pika.channel import Channel

from webhooks.errors import BrokerError
from webhooks.messaging import frame_writes
from webhooks.messaging.brokers import broker_parameters, describe

log = logging.getLogger(__name__)

frame_writes.install()  # acks and publishes: one write for every frame waiting

#: After a failure, skip publishing for this long (seconds): the relay catches up, and
#: requests do not each wait for a broker that is down.
COOLDOWN_SECONDS = 3.0

#: ``(queue name, body, headers)``
Outgoing = tuple[str, bytes, dict[str, Any]]


class PublishError(BrokerError):
    """The broker did not confirm a publish (down, nacked, or no such queue)."""


def message_properties(headers: dict[str, Any]) -> pika.BasicProperties:
    """Properties of every delivery message: persistent JSON with our headers."""
    return pika.BasicProperties(
        delivery_mode=pika.DeliveryMode.Persistent,
        content_type="application/json",
        headers=headers,
    )


class LinkBroken(BrokerError):
    """The connection or channel closed, or (``timed_out``) confirms did not come in time."""

    def __init__(self, message: str, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class BatchFailed(BrokerError):
    """Some messages of a batch were not published; ``confirmed`` lead the batch and were."""

    def __init__(self, confirmed: int, error: Exception) -> None:
        super().__init__(str(error))
        self.confirmed, self.error = confirmed, error


class ConfirmingLink:
    """One AMQP connection with a channel in confirm mode, pumped by whoever calls it.

    Not thread-safe: ``Publisher`` serialises its callers. Between batches nothing reads
    the socket; a connection the broker dropped meanwhile (missed heartbeats, restart)
    shows up as ``LinkBroken`` on the next batch and the publisher reconnects once.
    """

    def __init__(self, params: pika.connection.Parameters, confirm_timeout: float) -> None:
        self.confirm_timeout = confirm_timeout
        self.channel: Channel | None = None
        self.error: Exception | None = None
        self._confirmed_select = False
        self._tag = 0  # delivery tag of the last message published on this channel
        self._batch: Sequence[Outgoing] = ()
        self._first_tag = 1
        self._acked: list[bool] = []
        self._failed: list[str | None] = []
        self._ioloop = select_connection.IOLoop()
        self._ioloop.activate_poller()
        self.connection = pika.SelectConnection(
            params,
            on_open_callback=self._on_connection_open,
            on_open_error_callback=self._on_connection_error,
            on_close_callback=self._on_connection_closed,
            custom_ioloop=self._ioloop,
        )
        connect_timeout = (params.stack_timeout or 10.0) + 1.0
        if not self._pump(lambda: self._confirmed_select, connect_timeout):
            self.close()
            raise LinkBroken(f"could not open a confirming channel: {self.error or 'timed out'}")

    # -- callbacks -------------------------------------------------------------------------

    def _on_connection_open(self, connection: pika.SelectConnection) -> None:
        connection.channel(on_open_callback=self._on_channel_open)

    def _on_connection_error(self, _connection: pika.SelectConnection, error: BaseException | str) -> None:
        self.error = error if isinstance(error, Exception) else LinkBroken(str(error))

    def _on_connection_closed(self, _connection: pika.SelectConnection, reason: Exception) -> None:
        self.error = self.error or reason

    def _on_channel_open(self, channel: Channel) -> None:
        self.channel = channel
        channel.add_on_close_callback(self._on_channel_closed)
        channel.add_on_return_callback(self._on_return)
        channel.confirm_delivery(self._on_confirm, callback=self._on_confirm_selected)

    def _on_confirm_selected(self, _frame: pika.frame.Method) -> None:
        self._confirmed_select = True

    def _on_channel_closed(self, _channel: Channel, reason: Exception) -> None:
        self.error = self.error or reason

    def _on_return(self, _channel: Channel, method: pika.spec.Basic.Return, _properties: Any, body: bytes) -> None:
        # A return comes before the ack of the same message; match it by queue and body.
        for index, (queue, sent, _headers) in enumerate(self._batch):
            if self._failed[index] is None and queue == method.routing_key and sent == body:
                self._failed[index] = f"no queue {queue!r}: run rabbit_setup.py"
                return

    def _on_confirm(self, frame: pika.frame.Method) -> None:
        method = frame.method
        last = method.delivery_tag - self._first_tag
        first = 0 if method.multiple else last
        nacked = isinstance(method, pika.spec.Basic.Nack)
        for index in range(max(first, 0), min(last + 1, len(self._batch))):
            if self._acked[index]:
                continue
            self._acked[index] = True
            if nacked and self._failed[index] is None:
                self._failed[index] = (
                    f"broker refused the message for {self._batch[index][0]!r} (queue full, or its leader just changed)"
                )

    # -- driving ---------------------------------------------------------------------------

    def _pump(self, done: Callable[[], bool], seconds: float) -> bool:
        """Run the connection's I/O until ``done()``, an error or ``seconds`` pass."""
        deadline = time.monotonic() + seconds
        timer = self._ioloop.call_later(seconds, lambda: None)  # wakes poll() at the deadline
        try:
            while not done():
                if self.error is not None or time.monotonic() >= deadline:
                    return False
                self._ioloop.poll()
                self._ioloop.process_timeouts()
            return True
        finally:
            self._ioloop.remove_timeout(timer)

    @property
    def usable(self) -> bool:
        return self.error is None and self.connection.is_open and self.channel is not None and self.channel.is_open

    def publish(self, messages: Sequence[Outgoing]) -> int:
        """Publish every message, then wait for all confirms; return how many were confirmed.

        Raises ``BatchFailed`` (with the confirmed prefix) when not all were.
        """
        if not messages:
            return 0
        if not self.usable:
            raise BatchFailed(0, LinkBroken(f"connection closed: {self.error}"))
        self._batch, self._first_tag = messages, self._tag + 1
        self._acked, self._failed = [False] * len(messages), [None] * len(messages)
        try:
            for queue, body, headers in messages:
                self.channel.basic_publish("", queue, body, message_properties(headers), mandatory=True)
                self._tag += 1
            self._pump(lambda: all(self._acked), self.confirm_timeout)
        except (pika.exceptions.AMQPError, OSError) as error:
            self.error = self.error or error
        confirmed = 0
        for acked, failed in zip(self._acked, self._failed):
            if not acked or failed is not None:
                break
            confirmed += 1
        self._batch = ()
        if confirmed == len(messages):
            return confirmed
        refused = next((failed for failed in self._failed if failed is not None), None)
        if refused is not None:
            raise BatchFailed(confirmed, PublishError(refused))
        if self.error is not None:
            raise BatchFailed(confirmed, LinkBroken(f"connection lost: {self.error}"))
        # Still open, but the broker is too slow (or blocked): give the rest to the relay.
        self.error = LinkBroken(f"no confirm within {self.confirm_timeout:.1f} s", timed_out=True)
        raise BatchFailed(confirmed, self.error)

    def close(self) -> None:
        try:
            if self.connection.is_open:
                self.connection.close()
                self._pump(lambda: self.connection.is_closed, 1.0)
        except Exception:  # noqa: BLE001 - it is being discarded
            log.debug("ignoring error closing an AMQP connection", exc_info=True)
        finally:
            try:
                self._ioloop.close()
            except Exception:  # noqa: BLE001
                log.debug("ignoring error closing an AMQP ioloop", exc_info=True)


class Publisher:
    """A lazily opened confirming link, re-opened after a fork or a broken connection.

    With several broker nodes (``AMQP_URL`` listing a cluster) the first link goes to
    the first node that answers, in the order given. When a link breaks, the batch is
    retried once on a new link that starts with the next node, so a dead node costs
    one reconnect, not the batch. What is still unconfirmed after that stays for the
    outbox relay: a message counts only once a node of the cluster confirmed it.
    """

    def __init__(self, amqp_url: str, timeout: float = 1.0) -> None:
        self._nodes = broker_parameters(amqp_url, timeout)
        #: How long a batch may wait for its confirms before it counts as failed.
        self.confirm_timeout = self._nodes[0].blocked_connection_timeout or 5.0
        self._lock = threading.Lock()
        self._pid = 0
        self._link: ConfirmingLink | None = None
        self._link_node = 0  # index in ``_nodes`` of the node ``_link`` is connected to
        self._first_node = 0  # where the next connection attempt starts
        self._down_until = 0.0

    @property
    def node(self) -> str | None:
        """``host:port`` of the node the open link is connected to (None without one)."""
        return describe(self._nodes[self._link_node]) if self._link is not None else None

    def publish(self, messages: Sequence[Outgoing]) -> int:
        """Publish in order; return how many were confirmed (all, or a prefix on failure)."""
        with self._lock:
            if time.monotonic() < self._down_until or not messages:
                return 0
            done = 0
            for retry in (True, False):
                try:
                    link = self._ensure_link()
                    done += link.publish(messages[done:])
                    return done
                except BatchFailed as failure:
                    done += failure.confirmed
                    error: Exception = failure.error
                    refused = isinstance(error, PublishError)
                    self._close(node_failed=not refused)
                    if retry and not refused and not (isinstance(error, LinkBroken) and error.timed_out):
                        continue  # a stale connection or a dead node: reconnect (to the next node) once
                except LinkBroken as connect_error:
                    error = connect_error  # no node answered: trying them all again now would not help
                log.warning("publish failed after %d of %d messages: %s", done, len(messages), error)
                self._down_until = time.monotonic() + COOLDOWN_SECONDS
                return done
            return done

    def _ensure_link(self) -> ConfirmingLink:
        if self._pid != os.getpid():
            # Inherited from a parent process (gunicorn fork): never share its socket.
            self._link, self._pid = None, os.getpid()
        if self._link is None or not self._link.usable:
            self._close(node_failed=self._link is not None)
            self._link = self._open_link()
        return self._link

    def _open_link(self) -> ConfirmingLink:
        """A link to the first node that answers, trying each once from ``_first_node`` on."""
        errors = []
        for step in range(len(self._nodes)):
            index = (self._first_node + step) % len(self._nodes)
            try:
                link = ConfirmingLink(self._nodes[index], self.confirm_timeout)
            except (LinkBroken, pika.exceptions.AMQPError, OSError) as error:
                errors.append(f"{describe(self._nodes[index])}: {error}")
                continue
            if step or index != self._link_node:
                log.info("publishing through broker node %s", describe(self._nodes[index]))
            self._link_node = self._first_node = index
            return link
        raise LinkBroken("no broker node answered (" + "; ".join(errors) + ")")

    def _close(self, node_failed: bool = False) -> None:
        """Drop the link; after a failure of its node the next link starts with the next node."""
        link, self._link = self._link, None
        if link is not None:
            if node_failed:
                self._first_node = (self._link_node + 1) % len(self._nodes)
            link.close()

    def close(self) -> None:
        with self._lock:
            self._close()
