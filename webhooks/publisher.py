"""Publishing delivery messages: persistent, ``mandatory`` and confirmed, or an error.

Everything goes through the default exchange with the queue name as routing key, so
an unroutable publish (a missing queue) comes back as ``UnroutableError`` instead of
vanishing. ``Publisher`` is the bounded, fork-safe publisher of the web and clock
processes: when the broker is down it fails fast and the outbox relay takes over.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Sequence

import pika
import pika.exceptions
from flask import Flask, current_app
from pika.adapters.blocking_connection import BlockingChannel

from webhooks.config import Settings

log = logging.getLogger(__name__)

#: After a failure, skip publishing for this long (seconds): the relay catches up, and
#: requests do not each wait for a broker that is down.
COOLDOWN_SECONDS = 3.0

#: ``(queue name, body, headers)``
Outgoing = tuple[str, bytes, dict[str, Any]]


class PublishError(Exception):
    """The broker did not confirm a publish (down, nacked, or no such queue)."""


def publish_on(channel: BlockingChannel, queue: str, body: bytes, headers: dict[str, Any]) -> None:
    """Publish one persistent message to ``queue`` on a confirming channel, or raise PublishError."""
    try:
        channel.basic_publish(
            exchange="",
            routing_key=queue,
            body=body,
            properties=pika.BasicProperties(
                delivery_mode=pika.DeliveryMode.Persistent,
                content_type="application/json",
                headers=headers,
            ),
            mandatory=True,
        )
    except pika.exceptions.UnroutableError as error:
        raise PublishError(f"no queue {queue!r}: run rabbit_setup.py") from error
    except pika.exceptions.NackError as error:
        raise PublishError(f"broker refused the message for {queue!r} (queue full?)") from error


def connection_parameters(url: str, timeout: float) -> pika.URLParameters:
    """Parameters whose connect and socket operations give up after about ``timeout`` seconds."""
    params = pika.URLParameters(url)
    params.socket_timeout = timeout
    params.stack_timeout = timeout * 2
    params.blocked_connection_timeout = max(timeout * 5, 5.0)
    params.connection_attempts = 1
    return params


class Publisher:
    """A lazily opened confirming channel, re-opened after a fork or a broken connection."""

    def __init__(self, amqp_url: str, timeout: float = 1.0) -> None:
        self._params = connection_parameters(amqp_url, timeout)
        self._lock = threading.Lock()
        self._pid = 0
        self._connection: pika.BlockingConnection | None = None
        self._channel: BlockingChannel | None = None
        self._down_until = 0.0

    def publish(self, messages: Sequence[Outgoing]) -> int:
        """Publish in order; return how many were confirmed (all, or a prefix on failure)."""
        with self._lock:
            if time.monotonic() < self._down_until:
                return 0
            done = 0
            for retry in (True, False):
                try:
                    channel = self._ensure_channel()
                    for queue, body, headers in messages[done:]:
                        publish_on(channel, queue, body, headers)
                        done += 1
                    return done
                except (pika.exceptions.AMQPError, OSError, PublishError) as error:
                    self._close()
                    if retry and not isinstance(error, PublishError):
                        continue  # a stale connection (broker restart): reconnect once
                    log.warning("publish failed after %d of %d messages: %s", done, len(messages), error)
                    self._down_until = time.monotonic() + COOLDOWN_SECONDS
            return done

    def _ensure_channel(self) -> BlockingChannel:
        if self._pid != os.getpid():
            # Inherited from a parent process (gunicorn fork): never share its socket.
            self._connection, self._channel, self._pid = None, None, os.getpid()
        if self._connection is None or self._connection.is_closed or self._channel is None or self._channel.is_closed:
            self._close()
            self._connection = pika.BlockingConnection(self._params)
            self._channel = self._connection.channel()
            self._channel.confirm_delivery()
        else:
            self._connection.process_data_events(0)  # answers heartbeats, notices a closed socket
        return self._channel

    def _close(self) -> None:
        connection, self._connection, self._channel = self._connection, None, None
        if connection is not None and connection.is_open:
            try:
                connection.close()
            except Exception:  # noqa: BLE001 - it is being discarded because it is broken
                log.debug("ignoring error closing a broken AMQP connection", exc_info=True)

    def close(self) -> None:
        with self._lock:
            self._close()


def init_app(app: Flask, settings: Settings) -> None:
    """Give the app one publisher (connected on first use, in each forked worker) and the
    background enqueuer that publishes accepted events after the response."""
    from webhooks.outbox import BackgroundEnqueuer

    publisher = Publisher(settings.amqp_url, settings.publish_timeout)
    app.extensions["webhooks.publisher"] = publisher
    app.extensions["webhooks.enqueuer"] = BackgroundEnqueuer(publisher, settings.topology)


def current_publisher() -> Publisher:
    return current_app.extensions["webhooks.publisher"]
