"""The async floor: pika's ``AsyncioConnection`` consuming, one aiohttp ``ClientSession`` POSTing, ack (nack with
requeue on a failure): no database, no signing, no retry, the least an asyncio worker on this broker must do per
message, the shape of issue 10's delivery engine. ``--prefetch`` bounds the messages, and so the calls, in flight
per process. SIGTERM or SIGINT: stop consuming, finish the calls in flight, close.

``python -m bench.peers.async_floor --queue Q --url URL [--prefetch 256]``
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from typing import Any

import aiohttp
import pika
from pika.adapters.asyncio_connection import AsyncioConnection
from pika.channel import Channel
from pika.spec import Basic, BasicProperties

#: Messages (and so calls) in flight per process unless ``--prefetch`` says otherwise.
DEFAULT_PREFETCH = 256

#: Seconds a call may take, as the other contenders allow (httpx ``timeout=15``).
CALL_TIMEOUT = 15.0


class AsyncFloor:
    """One consumer: the connection's callbacks start tasks; each task POSTs and settles its message."""

    def __init__(self, amqp_url: str, queue: str, url: str, prefetch: int) -> None:
        self.amqp_url, self.queue, self.url, self.prefetch = amqp_url, queue, url, prefetch
        self.loop = asyncio.get_running_loop()
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=prefetch, ttl_dns_cache=None),
            timeout=aiohttp.ClientTimeout(total=CALL_TIMEOUT), trust_env=False)
        self.connection: AsyncioConnection | None = None
        self.channel: Channel | None = None
        self.consumer_tag: str | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.stopping = False
        #: Done when the connection closed: a result after ``stop``, an exception before it.
        self.closed: asyncio.Future[None] = self.loop.create_future()

    def start(self) -> None:
        AsyncioConnection(pika.URLParameters(self.amqp_url), on_open_callback=self._on_open,
                          on_open_error_callback=self._on_closed, on_close_callback=self._on_closed,
                          custom_ioloop=self.loop)

    def _on_closed(self, _connection: Any, error: Exception) -> None:
        if self.closed.done():
            return
        if self.stopping:
            self.closed.set_result(None)
        else:
            self.closed.set_exception(RuntimeError(f"AMQP connection lost: {error!r}"))

    def _on_open(self, connection: AsyncioConnection) -> None:
        self.connection = connection
        connection.channel(on_open_callback=self._on_channel)

    def _on_channel(self, channel: Channel) -> None:
        self.channel = channel
        channel.basic_qos(prefetch_count=self.prefetch, callback=lambda _frame: self._consume(channel))

    def _consume(self, channel: Channel) -> None:
        self.consumer_tag = channel.basic_consume(self.queue, self._on_message)

    def _on_message(self, channel: Channel, method: Basic.Deliver, properties: BasicProperties, body: bytes) -> None:
        webhook_id = str((properties.headers or {}).get("webhook-id", ""))
        task = self.loop.create_task(self._deliver(channel, method.delivery_tag, body, webhook_id))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _deliver(self, channel: Channel, tag: int, body: bytes, webhook_id: str) -> None:
        try:
            async with self.session.post(self.url, data=body, headers={"content-type": "application/json",
                                                                       "webhook-id": webhook_id}) as response:
                await response.read()
                ok = 200 <= response.status < 300
        except (aiohttp.ClientError, asyncio.TimeoutError):
            ok = False
        if channel.is_open:
            if ok:
                channel.basic_ack(tag)
            else:
                channel.basic_nack(tag, requeue=True)

    async def stop(self) -> None:
        """Stop consuming, let the calls in flight finish (and ack), close everything."""
        self.stopping = True
        if self.channel is not None and self.channel.is_open and self.consumer_tag is not None:
            self.channel.basic_cancel(self.consumer_tag)
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=CALL_TIMEOUT)
        await self.session.close()
        if self.connection is not None and self.connection.is_open:
            self.connection.close()
            await asyncio.wait([self.closed], timeout=5.0)


async def run(args: argparse.Namespace) -> None:
    floor = AsyncFloor(args.amqp_url, args.queue, args.url, args.prefetch)
    stopping = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        floor.loop.add_signal_handler(sig, stopping.set)
    floor.start()
    waiter = asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait([waiter, floor.closed], return_when=asyncio.FIRST_COMPLETED)
        if floor.closed.done():
            floor.closed.result()  # raises: the connection failed before a signal
    finally:
        waiter.cancel()
        await floor.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queue", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--prefetch", type=int, default=DEFAULT_PREFETCH)
    parser.add_argument("--amqp-url", default="amqp://guest:guest@127.0.0.1:5672/%2F")
    args = parser.parse_args()
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
