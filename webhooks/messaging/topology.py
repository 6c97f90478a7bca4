"""RabbitMQ topology: the exchange, the primary and bulk queues, one waiting queue per tier, the DLQ.

The bulk queue (``<prefix>.bulk``) takes the new deliveries of a tenant publishing far
more than its share (``webhooks.messaging.shares``); workers consume it beside the
primary queue on a connection of its own, so a flood waits there and not in front of
everyone else's messages (``docs/architecture.md``, "A flood's own queue").

Queue arguments are immutable once declared, so they are frozen here and the names
carry what could change (the delay), so a new ladder declares new queues.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pika.adapters.blocking_connection import BlockingChannel

from webhooks.durations import name_ms
from webhooks.messaging.ladder import Ladder

#: Routing key that brings a message (new, or back from a waiting tier) to the primary queue.
DELIVER_KEY = "deliver"

#: A poison message that keeps killing workers is dead-lettered after this many deliveries.
DELIVERY_LIMIT = 20

#: How long a deferred message (endpoint busy, attempt claimed elsewhere) waits, in ms.
DEFER_MS = 1000

#: Quorum queues with at-least-once dead-lettering: a message moving between tiers
#: survives a broker crash (classic dead-lettering is at-most-once, and needs reject-publish).
QUORUM: dict[str, Any] = {
    "x-queue-type": "quorum",
    "x-dead-letter-strategy": "at-least-once",
    "x-overflow": "reject-publish",
}


@dataclass(frozen=True)
class Topology:
    """Names and declarations for one ``QUEUE_PREFIX`` and ladder."""

    prefix: str
    ladder: Ladder

    @property
    def exchange(self) -> str:
        return self.prefix

    @property
    def primary(self) -> str:
        return f"{self.prefix}.deliver"

    @property
    def bulk(self) -> str:
        return f"{self.prefix}.bulk"

    def delivery_queues(self) -> list[str]:
        """The queues workers consume: the primary and the bulk queue."""
        return [self.primary, self.bulk]

    @property
    def dead(self) -> str:
        return f"{self.prefix}.dead"

    @property
    def defer(self) -> str:
        return f"{self.prefix}.wait.defer"

    def wait_queue(self, delay_ms: int) -> str:
        """``<prefix>.wait.5s``: the queue of the tier with this delay."""
        return f"{self.prefix}.wait.{name_ms(delay_ms)}"

    def wait_queues(self) -> dict[str, int]:
        """Every waiting queue of the ladder (and the defer queue) with its TTL in ms."""
        queues = {self.wait_queue(delay): delay for delay in self.ladder.delays_ms}
        queues[self.defer] = DEFER_MS
        return queues

    def all_queues(self) -> list[str]:
        return [self.primary, self.bulk, self.dead, *self.wait_queues()]

    def declare(self, channel: BlockingChannel) -> None:
        """Declare everything; idempotent, and a changed ladder only adds queues."""
        channel.exchange_declare(self.exchange, exchange_type="direct", durable=True)
        channel.queue_declare(self.dead, durable=True, arguments={"x-queue-type": "quorum"})
        for queue in self.delivery_queues():  # the bulk queue: declared by the same call on existing installations
            channel.queue_declare(
                queue,
                durable=True,
                arguments={
                    **QUORUM,
                    "x-delivery-limit": DELIVERY_LIMIT,
                    "x-dead-letter-exchange": "",
                    "x-dead-letter-routing-key": self.dead,
                },
            )
        channel.queue_bind(self.primary, self.exchange, routing_key=DELIVER_KEY)
        for queue, ttl_ms in self.wait_queues().items():
            channel.queue_declare(
                queue,
                durable=True,
                arguments={
                    **QUORUM,
                    "x-message-ttl": ttl_ms,
                    "x-dead-letter-exchange": self.exchange,
                    "x-dead-letter-routing-key": DELIVER_KEY,
                },
            )

    def check(self, channel: BlockingChannel) -> None:
        """Raise (closing the channel) if a queue of this ladder is missing.

        Passive declares: the worker refuses to start rather than publish into nothing.
        """
        for queue in self.all_queues():
            channel.queue_declare(queue, passive=True)

    def depths(self, channel: BlockingChannel) -> dict[str, int]:
        """Messages ready in each queue (read at scrape time by metrics and the console)."""
        return {queue: channel.queue_declare(queue, passive=True).method.message_count for queue in self.all_queues()}

    def delete(self, channel: BlockingChannel) -> None:
        """Remove every queue and the exchange (tests clean up their prefix with this)."""
        for queue in self.all_queues():
            channel.queue_delete(queue)
        channel.exchange_delete(self.exchange)
