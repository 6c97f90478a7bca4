"""The worker under failure: exhaustion, head-of-line blocking, broker outage, SIGKILL, poison."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pika

from tests.conftest import SESSION_PREFIX, amqp_channel, queue_messages, settings_env, wait_until
from tests.receivers import Receiver, always, sequence, sleep_then
from tests.api_helpers import create_endpoint, send
from webhooks.clock import tick
from webhooks.messaging.messages import DeliveryMessage
from webhooks.storage.models import Attempt, Delivery
from webhooks.messaging.publisher import Publisher


def delivery_of(event_id: str, status: str):
    return lambda: Delivery.get_or_none(Delivery.event == event_id, Delivery.status == status)


def test_exhausted_delivery_goes_to_dead_letter_queue_and_shows_as_failed(client, tenant, auth, settings, start_worker):
    with Receiver(always(500)) as receiver:
        create_endpoint(client, auth(tenant), receiver.url)
        start_worker(settings)
        event = send(client, auth(tenant))
        delivery = wait_until(delivery_of(event["id"], "failed"), timeout=15)
    assert delivery.attempts == settings.ladder.max_attempts == 3
    assert delivery.next_attempt_at is None and delivery.last_status_code == 500
    dead = wait_until(lambda: queue_messages(settings.topology.dead))
    assert [json.loads(body)["delivery_id"] for body, _ in dead] == [delivery.id]
    assert [a.outcome for a in Attempt.select().where(Attempt.delivery == delivery.id).order_by(Attempt.attempt_no)] == [
        "retrying", "retrying", "failed"]


def test_a_long_tier_queued_first_does_not_delay_a_short_tier(client, tenant, auth, make_settings, start_worker):
    settings = make_settings(ladder="1s,6s,10s")
    start_worker(settings)
    with Receiver(always(500)) as slow, Receiver(sequence([500, 200])) as quick:
        create_endpoint(client, auth(tenant), slow.url, event_types=["slow"])
        create_endpoint(client, auth(tenant), quick.url, event_types=["quick"])
        send(client, auth(tenant), event_type="slow")
        slow.wait_for(2, timeout=10)  # its third attempt now waits 6 s in the 6s tier
        send(client, auth(tenant), event_type="quick")
        first, second = quick.wait_for(2, timeout=10)
        assert 0.9 < second.received_at - first.received_at < 2.0
        assert len(slow.requests) == 2  # still waiting in the long tier


def test_endpoint_gets_only_the_event_types_it_subscribed_to(client, tenant, auth, settings, start_worker):
    with Receiver(always(200)) as orders, Receiver(always(200)) as everything:
        create_endpoint(client, auth(tenant), orders.url, event_types=["order.created"])
        catch_all = create_endpoint(client, auth(tenant), everything.url)
        start_worker(settings)
        signed_up = send(client, auth(tenant), event_type="user.signed_up")
        order = send(client, auth(tenant), event_type="order.created")
        # The filter works at ingest: the other type has no delivery to the orders endpoint at all.
        assert [d["endpoint_id"] for d in signed_up["deliveries"]] == [catch_all["id"]]
        everything.wait_for(2, timeout=10)
        (request,) = orders.wait_for(1, timeout=10)
        assert request.headers["webhook-id"] == order["id"]


def test_event_accepted_while_broker_is_down_is_delivered_by_the_relay(tenant, auth, make_settings, start_worker):
    from app import create_app

    settings = make_settings()
    down = create_app({"SETTINGS": settings.__class__(**{**settings.__dict__, "amqp_url": "amqp://guest:guest@127.0.0.1:1/%2F"}), "TESTING": True})
    with Receiver(always(200)) as receiver:
        client = down.test_client()
        create_endpoint(client, auth(tenant), receiver.url)
        started = time.monotonic()
        event = send(client, auth(tenant))
        assert time.monotonic() - started < 2.0  # the bounded publish did not hold the request
        (delivery,) = Delivery.select().where(Delivery.event == event["id"])
        assert delivery.enqueued_at is None
        start_worker(settings)
        time.sleep(settings.relay_grace)
        publisher = Publisher(settings.amqp_url)
        tick(settings, publisher)  # the clock's relay pass, with the broker reachable
        publisher.close()
        (request,) = receiver.wait_for(1, timeout=10)
        assert request.headers["webhook-id"] == event["id"]
        wait_until(delivery_of(event["id"], "delivered"))


def test_worker_killed_mid_delivery_does_not_lose_it(client, tenant, auth, settings):
    env = settings_env(settings)
    command = [sys.executable, "-m", "webhooks.worker"]
    with Receiver(sequence([sleep_then(2.0, 200), 200])) as receiver:
        create_endpoint(client, auth(tenant), receiver.url)
        first = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)
        try:
            event = send(client, auth(tenant))
            receiver.wait_for(1, timeout=15)
            first.kill()  # SIGKILL while the endpoint is still answering
            first.wait()
            assert Delivery.get(Delivery.event == event["id"]).status == "pending"
            second = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)
            try:
                delivery = wait_until(delivery_of(event["id"], "delivered"), timeout=30)
            finally:
                second.terminate()
                assert second.wait(timeout=20) == 0
        finally:
            first.kill()
    assert delivery.attempts == 1
    assert {r.headers["webhook-id"] for r in receiver.requests} == {event["id"]}


def test_poison_message_goes_to_the_dead_letter_queue_once(settings, start_worker):
    def publish(body: bytes) -> None:
        connection, channel = amqp_channel()
        channel.basic_publish("", settings.topology.primary, body, pika.BasicProperties(delivery_mode=2))
        connection.close()

    publish(b"\x00not json")
    start_worker(settings)
    wait_until(lambda: queue_messages(settings.topology.dead))
    # A second one behind it: once it is dead-lettered, the first had every chance to come round again.
    publish(b"\x00second")
    dead = wait_until(lambda: (bodies := [body for body, _ in queue_messages(settings.topology.dead)])
                      and b"\x00second" in bodies and bodies)
    assert dead == [b"\x00not json", b"\x00second"]
    assert queue_messages(settings.topology.primary) == []


def test_sigterm_lets_an_in_flight_delivery_finish(client, tenant, auth, settings):
    with Receiver(sleep_then(1.5, 200)) as receiver:
        create_endpoint(client, auth(tenant), receiver.url)
        worker = subprocess.Popen([sys.executable, "-m", "webhooks.worker"], env=settings_env(settings), stderr=subprocess.DEVNULL)
        try:
            event = send(client, auth(tenant))
            receiver.wait_for(1, timeout=15)
            worker.terminate()
            assert worker.wait(timeout=20) == 0
        finally:
            worker.kill()
    delivery = Delivery.get(Delivery.event == event["id"])
    assert delivery.status == "delivered" and delivery.attempts == 1


def test_a_message_whose_onward_publish_fails_returns_to_the_queue(make_settings, start_worker):
    # A message that must wait again (not_before an hour away) is republished to a
    # waiting queue before the ack. With every waiting queue gone that publish is
    # refused as unroutable: the message must go back to the primary queue (and after
    # the delivery limit to the dead-letter queue), never be acked and lost.
    message = DeliveryMessage("dlv_x", "evt_x", "ep_x", "ten_x", "order.created", "2026-11-23T10:00:00.000Z",
                              {"order": 1}, not_before=time.time() + 3600)
    body, headers = message.encode()
    settings = make_settings(queue_prefix=f"{SESSION_PREFIX}_unroutable")  # its own queues: some are deleted below
    worker = start_worker(settings)
    worker.rt.broker.requeue_pause = 0.05
    connection, channel = amqp_channel()
    try:
        for queue in settings.topology.wait_queues():
            channel.queue_delete(queue)
        channel.basic_publish("", settings.topology.primary, body, pika.BasicProperties(delivery_mode=2, headers=headers))
    finally:
        connection.close()

    dead = wait_until(lambda: queue_messages(settings.topology.dead), timeout=30)
    assert [json.loads(body)["delivery_id"] for body, _ in dead] == ["dlv_x"]
