"""The worker's broker session on the event loop: pika's ``AsyncioConnection``, awaited.

One ``Session`` is three connections to the first broker node that answers (``AMQP_URL``
may list a cluster's nodes): one consumes the primary queue with a prefetch window, one
consumes the bulk queue (a flooding tenant's new deliveries) with a window of its own, and
the third publishes in confirm mode. The bulk queue has its own connection, and so its own
socket: what the broker has sent of a flood and the worker has not read yet never stands
in front of another tenant's message in the primary queue's stream. A publish the broker refuses never closes the channel
that holds the unacknowledged messages, and RabbitMQ's flow control, which throttles a
connection that publishes faster than its queues take messages by no longer reading its
socket, never holds up the acks (RabbitMQ's guide advises separate connections for
publishing and consuming for this reason): a worker publishes bursts when it fetches a
backlog back from the database, and with acks stuck behind them the broker would hand
it nothing more.

The prefetch is spread over several consuming channels of at most ``CHANNEL_PREFETCH``
unacknowledged messages each. A channel's process on the broker finds each ack by
walking its queue of unacknowledged messages from the oldest (rabbitmq-server#1511,
left as is), and a worker acks out of order: a fast endpoint's messages before a slow
one's, a spilled message long before the message in front of it. With all 30,000 of a
worker's messages on one channel, that walk took one broker core entirely, and the broker
handed the worker nothing for seconds at a time (``bench/RESULTS.md``). Delivery tags
are per channel: the session numbers them ``tag * CHANNEL_SLOTS + channel``. Publishing is
pipelined: each ``publish`` returns once the broker confirmed (or refused) that
message, while others are under way. Every publish is ``mandatory`` through the
default exchange, so a missing queue comes back as a refusal, not a silent drop: a
message is never lost on its way to a queue nobody declared. ``closed`` resolves when the connection or a channel goes away.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Iterable, Sequence

import pika
import pika.channel
import pika.exceptions
import pika.frame
import pika.spec
from pika.adapters.asyncio_connection import AsyncioConnection

from webhooks.errors import BrokerError
from webhooks.messaging import frame_writes
from webhooks.messaging.publisher import message_properties

log = logging.getLogger(__name__)

frame_writes.install()  # acks and publishes: one write for every frame waiting

#: ``on_message(tag, properties, body)`` for each message consumed.
OnMessage = Callable[[int, pika.BasicProperties, bytes], None]


#: Unacknowledged messages per consuming channel, at most (channels of 2,000, 15 at the default
#: prefetch, cost the worker enough CPU to slow a 2-core machine's ingestion by a fifth) ...
CHANNEL_PREFETCH = 5_000
#: ... over at most this many channels, the primary and the bulk queue's together (a delivery tag
#: carries its channel in its low bits).
CHANNEL_SLOTS = 32

#: A closing session waits this long at most for the broker to confirm its connections closed
#: (seconds), looking every ``CLOSE_POLL_SECONDS``.
CLOSE_TIMEOUT_SECONDS = 5.0
CLOSE_POLL_SECONDS = 0.01


def consumer_channels(prefetch: int) -> list[int]:
    """The prefetch of each consuming channel: ``prefetch`` shared as evenly as can be."""
    count = min(CHANNEL_SLOTS, max(1, -(-prefetch // CHANNEL_PREFETCH)))
    return [prefetch // count + (1 if n < prefetch % count else 0) for n in range(count)]


def confirmed_tags(frame: pika.frame.Method, waiting: Iterable[int]) -> tuple[bool, list[int]]:
    """What a publisher confirm says: acked (or nacked), and which of the ``waiting`` tags (all up
    to its tag when it is ``multiple``)."""
    method = frame.method
    last = method.delivery_tag
    return isinstance(method, pika.spec.Basic.Ack), [tag for tag in waiting if tag <= last] if method.multiple else [last]


class SessionClosed(BrokerError):
    """The broker connection or one of its channels closed."""


class MissingQueue(SessionClosed):
    """A queue the worker needs does not exist (``python rabbit_setup.py`` was not run)."""


class Session:
    """A consuming connection and channel, and a publishing connection with a confirming channel."""

    def __init__(self, number: int) -> None:
        #: Sessions are numbered so a delivery tag can be matched to the channel it belongs to.
        self.number = number
        self.loop = asyncio.get_running_loop()
        self.closed: asyncio.Future[BaseException] = self.loop.create_future()
        #: Consumes (and acks); ``publishing`` publishes.
        self.connection: AsyncioConnection | None = None
        self.publishing: AsyncioConnection | None = None
        #: Consumes the bulk queue (``consume``'s ``bulk``).
        self.bulk_connection: AsyncioConnection | None = None
        #: The consuming channels: one from the start (it also asks the broker about queues), the rest in ``consume``.
        self.consumers: list[pika.channel.Channel] = []
        self.publisher: pika.channel.Channel | None = None
        self.consumer_tags: list[tuple[pika.channel.Channel, str]] = []
        #: Channels consuming each queue (``consume``): ``workers`` divides the broker's consumer count by it.
        self._channels_per_queue = 1
        self._published = 0
        self._confirms: dict[int, asyncio.Future[bool]] = {}
        self._returned: set[int] = set()

    # -- opening ------------------------------------------------------------------------------

    async def open(self, parameters: Sequence[pika.URLParameters], timeout: float) -> None:
        """Connect to the first node that answers (three times), open the first consuming channel and the
        publishing one (in confirm mode)."""
        self.connection = await self._connect(parameters, timeout)
        self.bulk_connection = await self._connect(parameters, timeout)
        self.publishing = await self._connect(parameters, timeout)
        self.consumers = [await self._channel(self.connection)]
        self.publisher = await self._channel(self.publishing)
        self.publisher.add_on_return_callback(self._on_return)
        await self._rpc(lambda callback: self.publisher.confirm_delivery(self._on_confirm, callback=callback))

    async def _connect(self, parameters: Sequence[pika.URLParameters], timeout: float) -> AsyncioConnection:
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
        result.add_on_close_callback(self._on_connection_closed)
        if self.closed.done():  # the other connection went away meanwhile
            result.close()
            raise self.closed.result()
        return result

    async def _channel(self, connection: AsyncioConnection) -> pika.channel.Channel:
        opened: asyncio.Future[pika.channel.Channel] = self.loop.create_future()
        connection.channel(on_open_callback=lambda channel: opened.done() or opened.set_result(channel))
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
            assert self.connection is not None
            channel = await self._channel(self.connection)
            frame = await self._rpc(lambda callback, q=queue: channel.queue_declare(q, passive=True, callback=callback))
            if frame is None:  # pragma: no cover - the broker answers or closes
                raise MissingQueue(queue)
            channel.close()

    async def workers(self, queue: str) -> int:
        """How many workers consume ``queue`` now (this one included), taking each to consume on as many
        channels as this one (workers share ``WORKER_PREFETCH``)."""
        channel = self.consumer
        frame = await self._rpc(lambda callback: channel.queue_declare(queue, passive=True, callback=callback))
        return -(-int(frame.method.consumer_count) // max(self._channels_per_queue, 1))

    async def consume(self, queue: str, prefetch: int, on_message: OnMessage, bulk: str | None = None) -> None:
        """Consume ``queue`` with ``prefetch`` unacknowledged messages at most, over ``consumer_channels``,
        and ``bulk`` (if given) with as many again on the bulk connection."""
        assert self.connection is not None and self.bulk_connection is not None
        shares = consumer_channels(prefetch)
        self.consumers = [self.consumer] + [await self._channel(self.connection) for _ in shares[1:]]
        queues, self._channels_per_queue = [queue] * len(shares), len(shares)
        if bulk is not None:
            self.consumers += [await self._channel(self.bulk_connection) for _ in shares]
            queues += [bulk] * len(shares)
            shares = shares * 2
        for slot, (channel, share, name) in enumerate(zip(self.consumers, shares, queues)):
            await self._rpc(lambda callback, c=channel, n=share: c.basic_qos(prefetch_count=n, callback=callback))

            def deliver(_channel: Any, method: pika.spec.Basic.Deliver, properties: pika.BasicProperties, body: bytes,
                        slot: int = slot) -> None:
                on_message(method.delivery_tag * CHANNEL_SLOTS + slot, properties, body)

            consumed: asyncio.Future[Any] = self.loop.create_future()
            tag = channel.basic_consume(name, deliver, callback=lambda frame, f=consumed: f.done() or f.set_result(frame))
            self.consumer_tags.append((channel, tag))
            await self._until(consumed)

    async def cancel(self) -> None:
        """Take no more messages (those already delivered stay ours to settle)."""
        tags, self.consumer_tags = self.consumer_tags, []
        for channel, tag in tags:
            if channel.is_open:
                try:
                    await self._rpc(lambda callback, c=channel, t=tag: c.basic_cancel(t, callback=callback))
                except SessionClosed:
                    return

    @property
    def consumer(self) -> pika.channel.Channel:
        """The first consuming channel (opened with the session)."""
        if not self.consumers:
            raise SessionClosed("the session is not open")
        return self.consumers[0]

    @property
    def is_open(self) -> bool:
        return not self.closed.done()

    def _consumer_of(self, tag: int) -> tuple[pika.channel.Channel | None, int]:
        """The channel a session's delivery tag belongs to, and the channel's own tag."""
        slot, channel_tag = tag % CHANNEL_SLOTS, tag // CHANNEL_SLOTS
        channel = self.consumers[slot] if self.is_open and slot < len(self.consumers) else None
        return (channel if channel is not None and channel.is_open else None), channel_tag

    def ack(self, tag: int) -> None:
        channel, channel_tag = self._consumer_of(tag)
        if channel is not None:
            channel.basic_ack(channel_tag)

    def requeue(self, tag: int) -> None:
        """Give a message back to the queue (another worker, or this one later, takes it)."""
        channel, channel_tag = self._consumer_of(tag)
        if channel is not None:
            channel.basic_nack(channel_tag, requeue=True)

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
        acked, tags = confirmed_tags(frame, self._confirms)
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
        elif channel is self.publisher or any(channel is c for c in self.consumers):
            self._close(reason)

    def _close(self, reason: BaseException) -> None:
        if not self.closed.done():
            self.closed.set_result(reason if isinstance(reason, SessionClosed) else SessionClosed(str(reason) or type(reason).__name__))
        for future in self._confirms.values():
            if not future.done():
                future.set_result(False)
        self._confirms.clear()
        for connection in (self.connection, self.bulk_connection, self.publishing):
            if connection is not None and connection.is_open:
                connection.close()

    async def close(self) -> None:
        """Close the connections (unacknowledged messages go back to their queue)."""
        for connection in (self.publishing, self.bulk_connection, self.connection):
            if connection is not None and not (connection.is_closed or connection.is_closing):
                try:
                    connection.close()
                except pika.exceptions.ConnectionWrongStateError:
                    pass
        deadline = self.loop.time() + CLOSE_TIMEOUT_SECONDS
        while self.loop.time() < deadline and not (
                self.closed.done() and all(c is None or c.is_closed
                                           for c in (self.connection, self.bulk_connection, self.publishing))):
            await asyncio.sleep(CLOSE_POLL_SECONDS)
        self._close(SessionClosed("closed by the worker"))
