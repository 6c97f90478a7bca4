"""Nothing stuck: a delivery whose message was lost is published again; one that only waits is left alone."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pika
import pytest
from prometheus_client import REGISTRY

from tests.conftest import amqp_channel, queue_messages, wait_until
from tests.receivers import Receiver, always
from tests.api_helpers import create_endpoint, make_attempt, send
from webhooks.delivery import sweeper
from webhooks.storage.models import Delivery
from webhooks.messaging.publisher import Publisher
from webhooks.storage.ids import new_id
from webhooks.storage.timeutil import utcnow

#: How long ago the lost deliveries were due, against the sweeper's threshold.
LONG_AGO = timedelta(seconds=sweeper.STUCK_AFTER_SECONDS + 60)


def lose_messages(settings: Any) -> None:
    """What a purge of the primary queue (or dead-lettering by the delivery limit) does."""
    connection, channel = amqp_channel()
    try:
        channel.queue_purge(settings.topology.primary)
    finally:
        connection.close()


def overdue(**changes: Any) -> None:
    Delivery.update(next_attempt_at=utcnow() - LONG_AGO, **changes).execute()


def sweep(settings: Any) -> int:
    publisher = Publisher(settings.amqp_url)
    try:
        return sweeper.sweep(publisher, settings.topology, settings.amqp_url)
    finally:
        publisher.close()


def test_a_delivery_whose_message_was_lost_is_published_again_and_delivered(
    client: Any, tenant: Any, auth: Any, settings: Any, start_worker: Any
) -> None:
    with Receiver(always(204)) as receiver:
        create_endpoint(client, auth(tenant), receiver.url)
        event = send(client, auth(tenant))
        wait_until(lambda: Delivery.get(Delivery.event == event["id"]).enqueued_at is not None)
        lose_messages(settings)
        overdue()

        assert sweep(settings) == 1
        assert sweep(settings) == 0, "due again now: not picked twice"
        start_worker(settings)
        (request,) = receiver.wait_for(1, timeout=10)
    assert request.headers["webhook-id"] == event["id"]
    wait_until(lambda: Delivery.get(Delivery.event == event["id"]).status == "delivered")


def test_deliveries_held_by_a_worker_or_waiting_in_the_database_are_not_copied(
    client: Any, tenant: Any, auth: Any, settings: Any
) -> None:
    create_endpoint(client, auth(tenant), "http://127.0.0.1:9/hook")
    for _ in range(3):
        send(client, auth(tenant))
    wait_until(lambda: not Delivery.select().where(Delivery.enqueued_at.is_null()).exists())
    lose_messages(settings)
    leased, spilled, recent = list(Delivery.select())
    overdue()
    Delivery.update(lease_until=utcnow() + timedelta(seconds=30)).where(Delivery.id == leased.id).execute()
    Delivery.update(spilled_at=utcnow()).where(Delivery.id == spilled.id).execute()
    Delivery.update(next_attempt_at=utcnow() - timedelta(seconds=sweeper.STUCK_AFTER_SECONDS / 2)).where(
        Delivery.id == recent.id).execute()

    assert sweep(settings) == 0
    assert queue_messages(settings.topology.primary) == []


@pytest.mark.parametrize("queue", ["primary", "bulk"])
def test_nothing_is_swept_while_the_primary_or_the_bulk_queue_has_a_backlog(
    client: Any, tenant: Any, auth: Any, settings: Any, queue: str
) -> None:
    """A flooding tenant's deliveries wait their turn in the bulk queue: not lost either."""
    create_endpoint(client, auth(tenant), "http://127.0.0.1:9/hook")
    send(client, auth(tenant))
    wait_until(lambda: not Delivery.select().where(Delivery.enqueued_at.is_null()).exists())
    lose_messages(settings)
    overdue()
    connection, channel = amqp_channel()
    try:
        channel.confirm_delivery()
        for _ in range(sweeper.QUIET_QUEUE_BELOW):
            channel.basic_publish("", getattr(settings.topology, queue), b"{}", pika.BasicProperties(delivery_mode=2))
    finally:
        connection.close()
    # The queue's count lags the confirms a little on a busy broker: wait until it shows them all.
    wait_until(lambda: (sweeper.ready_to_deliver(settings.amqp_url, settings.topology) or 0) >= sweeper.QUIET_QUEUE_BELOW)

    assert sweep(settings) == 0, "a late delivery is waiting its turn in the queue"


def test_a_delivery_of_an_endpoint_still_being_worked_through_is_not_copied_until_the_endpoint_is_idle(
    client: Any, tenant: Any, auth: Any, settings: Any
) -> None:
    """Overdue, yet maybe waiting its turn in a worker's memory: its endpoint made an attempt lately."""
    create_endpoint(client, auth(tenant), "http://127.0.0.1:9/hook")
    send(client, auth(tenant))
    wait_until(lambda: not Delivery.select().where(Delivery.enqueued_at.is_null()).exists())
    lose_messages(settings)
    overdue()
    (delivery,) = Delivery.select()
    seconds_ago = lambda seconds: int((time.time() - seconds) * 1000)  # noqa: E731
    lately = make_attempt(delivery.id, 90, id=new_id("att", now_ms=seconds_ago(sweeper.IDLE_FOR_SECONDS / 2)))

    assert sweep(settings) == 0, "its endpoint is moving: the delivery may be waiting its turn"

    lately.delete_instance()
    make_attempt(delivery.id, 91, id=new_id("att", now_ms=seconds_ago(sweeper.IDLE_FOR_SECONDS + 5)))
    assert sweep(settings) == 1
