"""The worker's broker session on the event loop: pika's ``AsyncioConnection``, awaited.

One ``Session`` is one connection to the first broker node that answers (``AMQP_URL``
may list a cluster's nodes) with two channels: one consumes the primary queue with a
prefetch window, the other publishes in confirm mode, so a publish the broker refuses
never closes the channel that holds the unacknowledged messages. Publishing is
pipelined: each ``publish`` returns once the broker confirmed (or refused) that
message, while others are under way. Every publish is ``mandatory`` through the
default exchange, so a missing queue comes back as a refusal, not a silent drop
(decision 2). ``closed`` resolves when the connection or a channel goes away.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Sequence

import pika
import pika.channel
import pika.exceptions
import pika.frame
import pika.spec
from pika.adapters.asyncio_connection import AsyncioConnection

from webhooks.messaging.publisher import message_properties

log = logging.getLogger(__name__)

#: ``on_message(tag, properties, body)`` for each message consumed.
OnMessage = Callable[[int, pika.BasicProperties, bytes], None]


class SessionClosed(Exception):
    """The broker connection or one of its channels closed."""


class MissingQueue(SessionClosed):
    """A queue the worker needs does not exist (``python rabbit_setup.py`` was not run)."""


class Session:
    """A connection, a consuming channel and a confirming channel."""

    def __init__(self, number: int) -> None:
        #: Sessions are numbered so a delivery tag can be matched to the channel it belongs to.
        self.number = number
        self.loop = asyncio.get_running_loop()
        self.closed: asyncio.Future[BaseException] = self.loop.create_future()
        self.connection: AsyncioConnection | None = None
        self.consumer: pika.channel.Channel | None = None
        self.publisher: pika.channel.Channel | None = None
        self.consumer_tag: str | None = None
        self._published = 0
        self._confirms: dict[int, asyncio.Future[bool]] = {}
        self._returned: set[int] = set()

    # -- opening ------------------------------------------------------------------------------

    async def open(self, parameters: Sequence[pika.URLParameters], timeout: float) -> None:
        """Connect to the first node that answers, open both channels (confirm mode on one)."""
        done: asyncio.Future[Any] = self.loop.create_future()

        def on_done(result: Any) -> None:
            if not done.done():
                done.set_result(result)

        workflow = AsyncioConnection.create_connection(list(parameters), on_done, custom_ioloop=self.loop)
        try:
            result = await asyncio.wait_for(done, timeout)
        except asyncio.TimeoutError:
            workflow.abort()
            raise SessionClosed(f"no broker answered within {timeout:.0f} s") from None
        if isinstance(result, BaseException):
            raise SessionClosed(f"cannot connect to the broker: {result}") from result
        self.connection = result
        result.add_on_close_callback(self._on_connection_closed)
        self.consumer = await self._channel()
        self.publisher = await self._channel()
        self.publisher.add_on_return_callback(self._on_return)
        await self._rpc(lambda callback: self.publisher.confirm_delivery(self._on_confirm, callback=callback))

    async def _channel(self) -> pika.channel.Channel:
        opened: asyncio.Future[pika.channel.Channel] = self.loop.create_future()
        assert self.connection is not None
        self.connection.channel(on_open_callback=lambda channel: opened.done() or opened.set_result(channel))
        channel = await self._until(opened)
        channel.add_on_close_callback(self._on_channel_closed)
        return channel

    async def _rpc(self, start: Callable[[Callable[[Any], None]], None]) -> Any:
        """Send a synchronous AMQP method; its answer frame, or SessionClosed."""
        answer: asyncio.Future[Any] = self.loop.create_future()
        start(lambda frame: answer.done() or answer.set_result(frame))
        return await self._until(answer)

    async def _until(self, future: asyncio.Future[Any]) -> Any:
        """``future``'s result, or SessionClosed as soon as the session closes."""
        await asyncio.wait([future, self.closed], return_when=asyncio.FIRST_COMPLETED)
        if future.done():
            return future.result()
        future.cancel()
        raise self.closed.result() if isinstance(self.closed.result(), SessionClosed) else SessionClosed(str(self.closed.result()))

    # -- consuming ------------------------------------------------------------------------------

    async def check_queues(self, queues: Sequence[str]) -> None:
        """Raise MissingQueue unless every queue exists (a passive declare each, on a spare channel)."""
        for queue in queues:
            channel = await self._channel()
            frame = await self._rpc(lambda callback, q=queue: channel.queue_declare(q, passive=True, callback=callback))
            if frame is None:  # pragma: no cover - the broker answers or closes
                raise MissingQueue(queue)
            channel.close()

    async def consumers(self, queue: str) -> int:
        """How many consumers ``queue`` has now (this one included)."""
        assert self.consumer is not None
        frame = await self._rpc(lambda callback: self.consumer.queue_declare(queue, passive=True, callback=callback))
        return int(frame.method.consumer_count)

    async def consume(self, queue: str, prefetch: int, on_message: OnMessage) -> None:
        assert self.consumer is not None
        channel = self.consumer
        await self._rpc(lambda callback: channel.basic_qos(prefetch_count=prefetch, callback=callback))

        def deliver(_channel: Any, method: pika.spec.Basic.Deliver, properties: pika.BasicProperties, body: bytes) -> None:
            on_message(method.delivery_tag, properties, body)

        consumed: asyncio.Future[Any] = self.loop.create_future()
        self.consumer_tag = channel.basic_consume(
            queue, deliver, callback=lambda frame: consumed.done() or consumed.set_result(frame)
        )
        await self._until(consumed)

    async def cancel(self) -> None:
        """Take no more messages (those already delivered stay ours to settle)."""
        if self.consumer is not None and self.consumer.is_open and self.consumer_tag is not None:
            tag, self.consumer_tag = self.consumer_tag, None
            try:
                await self._rpc(lambda callback: self.consumer.basic_cancel(tag, callback=callback))
            except SessionClosed:
                pass

    @property
    def is_open(self) -> bool:
        return not self.closed.done()

    def ack(self, tag: int) -> None:
        if self.is_open and self.consumer is not None and self.consumer.is_open:
            self.consumer.basic_ack(tag)

    def requeue(self, tag: int) -> None:
        """Give a message back to the queue (another worker, or this one later, takes it)."""
        if self.is_open and self.consumer is not None and self.consumer.is_open:
            self.consumer.basic_nack(tag, requeue=True)

    # -- publishing -----------------------------------------------------------------------------

    async def publish(self, queue: str, body: bytes, headers: dict[str, Any], timeout: float) -> bool:
        """Publish persistently to ``queue``; True once the broker confirmed it and routed it."""
        if not self.is_open or self.publisher is None or not self.publisher.is_open:
            return False
        self._published += 1
        tag = self._published
        confirmed: asyncio.Future[bool] = self.loop.create_future()
        self._confirms[tag] = confirmed
        properties = message_properties(headers)
        properties.message_id = str(tag)  # comes back on a return, to match it to this publish
        try:
            self.publisher.basic_publish("", queue, body, properties, mandatory=True)
        except (pika.exceptions.AMQPError, OSError) as error:
            self._confirms.pop(tag, None)
            log.warning("publish to %s failed: %r", queue, error)
            return False
        try:
            return await asyncio.wait_for(asyncio.shield(confirmed), timeout)
        except asyncio.TimeoutError:
            log.warning("no confirm from the broker within %.1f s for a message to %s", timeout, queue)
            return False
        finally:
            self._confirms.pop(tag, None)

    def _on_return(self, _channel: Any, method: pika.spec.Basic.Return, properties: pika.BasicProperties, _body: bytes) -> None:
        # A return comes before the confirm of the same message.
        log.warning("message returned by the broker (%s %s): no queue %r; run `python rabbit_setup.py`",
                    method.reply_code, method.reply_text, method.routing_key)
        if properties.message_id and properties.message_id.isdigit():
            self._returned.add(int(properties.message_id))

    def _on_confirm(self, frame: pika.frame.Method) -> None:
        method = frame.method
        acked = isinstance(method, pika.spec.Basic.Ack)
        last = method.delivery_tag
        tags = [tag for tag in self._confirms if tag <= last] if method.multiple else [last]
        for tag in tags:
            future = self._confirms.get(tag)
            returned = tag in self._returned
            self._returned.discard(tag)
            if future is not None and not future.done():
                future.set_result(acked and not returned)

    # -- closing --------------------------------------------------------------------------------

    def _on_connection_closed(self, _connection: Any, reason: BaseException) -> None:
        self._close(reason)

    def _on_channel_closed(self, channel: pika.channel.Channel, reason: BaseException) -> None:
        if isinstance(reason, pika.exceptions.ChannelClosedByBroker) and reason.reply_code == 404:
            self._close(MissingQueue(reason.reply_text))
        elif channel is self.consumer or channel is self.publisher:
            self._close(reason)

    def _close(self, reason: BaseException) -> None:
        if not self.closed.done():
            self.closed.set_result(reason if isinstance(reason, SessionClosed) else SessionClosed(str(reason) or type(reason).__name__))
        for future in self._confirms.values():
            if not future.done():
                future.set_result(False)
        self._confirms.clear()
        if self.connection is not None and self.connection.is_open:
            self.connection.close()

    async def close(self) -> None:
        """Close the connection (unacknowledged messages go back to their queue)."""
        if self.connection is not None and not (self.connection.is_closed or self.connection.is_closing):
            try:
                self.connection.close()
            except pika.exceptions.ConnectionWrongStateError:
                pass
        if not self.closed.done():
            try:
                await asyncio.wait_for(asyncio.shield(self.closed), 5.0)
            except asyncio.TimeoutError:
                self._close(SessionClosed("closed by the worker"))
