"""Nothing stuck: a delivery whose message was lost, or is held where no worker can reach it,
is found and published again.

A message can leave the broker without its attempt being made: dead-lettered after
``x-delivery-limit`` returns (a worker kept crashing, or lost its connection with the
message unacked 20 times), or a queue purged by an operator. And one can stay where no
worker reaches it: when a RabbitMQ node is lost, a waiting tier's dead-letter worker on
that node's replica keeps its expired messages until the node is back (``docs/reliability.md``;
7 events of a run waited 352 s). Either way its delivery stays ``pending`` or ``retrying``
with its message long confirmed. The clock looks for deliveries overdue by
``STUCK_AFTER_SECONDS`` that no worker holds: no live lease, no backlog mark, and an endpoint
that made no attempt for ``IDLE_FOR_SECONDS`` (a delivery of an endpoint being worked through
may be waiting its turn in a worker's memory: a lane holds about ``spill.HOLD_SECONDS`` of its
pace, more for a slow endpoint). It publishes them again; their due time moves to now, so they
are not picked again before another ``STUCK_AFTER_SECONDS``. It does so only while the primary
and bulk queues hold almost nothing ready: with a backlog in either, a late delivery is
simply waiting its turn there (a flooding tenant's in the bulk queue). A copy too many is harmless: the claim drops it (the held message,
when it comes back, finds its attempt made).
"""

from __future__ import annotations

import logging

import pika

from webhooks import metrics
from webhooks.delivery import backlog
from webhooks.messaging.brokers import broker_parameters
from webhooks.messaging.outbox import message_for, publish_messages
from webhooks.messaging.publisher import Publisher
from webhooks.storage.timeutil import utcnow
from webhooks.messaging.topology import Topology

log = logging.getLogger(__name__)

#: A delivery this far past its due time, held by no worker, has lost its message (seconds).
#: As long as a lane holds a message in memory (``spill.HOLD_SECONDS``).
STUCK_AFTER_SECONDS = 30.0

#: ... if its endpoint made no attempt for this long (seconds): twice the default
#: ``DELIVERY_TIMEOUT``, so an endpoint whose window is down to one slow call still counts as moving.
IDLE_FOR_SECONDS = 30.0

#: How often the clock sweeps (seconds): a lost message is published again at most this long
#: after ``STUCK_AFTER_SECONDS`` and ``IDLE_FOR_SECONDS`` have both passed.
SWEEP_EVERY_SECONDS = 10.0

#: How long the sweeper's look at the primary and bulk queues may wait for the broker (seconds).
QUEUE_LOOK_TIMEOUT_SECONDS = 2.0

#: Sweep only while fewer messages than this wait ready in the primary and bulk queues together.
QUIET_QUEUE_BELOW = 100


def ready_to_deliver(amqp_url: str, topology: Topology) -> int | None:
    """Messages ready in the queues workers consume, the primary and the bulk queue (None: the broker did
    not answer)."""
    try:
        connection = pika.BlockingConnection(broker_parameters(amqp_url, QUEUE_LOOK_TIMEOUT_SECONDS))
    except pika.exceptions.AMQPError:
        return None
    try:
        channel = connection.channel()
        return sum(channel.queue_declare(queue, passive=True).method.message_count
                   for queue in topology.delivery_queues())
    except pika.exceptions.AMQPError:
        return None
    finally:
        if connection.is_open:
            connection.close()


def sweep(publisher: Publisher, topology: Topology, amqp_url: str, older_than: float = STUCK_AFTER_SECONDS) -> int:
    """Publish again the deliveries whose message was lost; how many."""
    ready = ready_to_deliver(amqp_url, topology)
    if ready is None or ready >= QUIET_QUEUE_BELOW:
        return 0
    rows = backlog.stuck(older_than, IDLE_FOR_SECONDS)
    if not rows:
        return 0
    messages = [message_for(delivery, event) for delivery, event in rows]
    confirmed = publish_messages(publisher, topology, messages)
    backlog.mark_republished([m.delivery_id for m in messages[:confirmed]], utcnow())
    metrics.REPUBLISHED.inc(confirmed)
    log.warning("published again %d deliveries whose message was lost (overdue by more than %.0f s)",
                confirmed, older_than)
    return confirmed
