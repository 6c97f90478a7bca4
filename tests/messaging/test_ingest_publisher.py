"""Batched publishing with confirms (real RabbitMQ): one wait for a whole batch, never a false claim,
and a move to the next broker node when one dies.

``Publisher.publish`` sends every message of a batch and then waits once for all of
the broker's confirms. It reports how many messages, from the start of the batch and
in order, the broker acked without returning them; callers mark exactly those, and the
outbox relay republishes the rest.
"""

from __future__ import annotations

import json
import secrets
import socket
import time
from typing import Any, Iterator

import pytest

from tests.api_helpers import DEAD_AMQP_URL
from tests.conftest import AMQP_URL, SESSION_PREFIX, amqp_channel, queue_messages
from tests.tcp_proxy import TcpProxy
from webhooks.messaging import publisher as publisher_module
from webhooks.messaging.brokers import broker_parameters, describe
from webhooks.messaging.publisher import ConfirmingLink, Outgoing, Publisher


def declare_queue(arguments: dict[str, Any] | None = None) -> str:
    name = f"{SESSION_PREFIX}.pub.{secrets.token_hex(3)}"
    connection, channel = amqp_channel()
    try:
        channel.queue_declare(name, durable=True, arguments=arguments or {})
    finally:
        connection.close()
    return name


def delete_queue(name: str) -> None:
    connection, channel = amqp_channel()
    try:
        channel.queue_delete(name)
    finally:
        connection.close()


@pytest.fixture
def queue() -> Iterator[str]:
    name = declare_queue()
    yield name
    delete_queue(name)


@pytest.fixture
def publisher() -> Iterator[Publisher]:
    made = Publisher(AMQP_URL, timeout=2.0)
    yield made
    made.close()


def batch(queue: str, count: int, start: int = 0) -> list[Outgoing]:
    return [(queue, json.dumps({"n": n}).encode(), {"attempt": 1}) for n in range(start, start + count)]


def numbers(queue: str) -> list[int]:
    return [json.loads(body)["n"] for body, _headers in queue_messages(queue)]


class PumpCounter:
    """Counts how often a link waits for the broker (connecting included)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        original = ConfirmingLink._pump

        def counting(link: ConfirmingLink, *args: Any, **kwargs: Any) -> bool:
            self.calls += 1
            return original(link, *args, **kwargs)

        monkeypatch.setattr(ConfirmingLink, "_pump", counting)


def test_a_batch_is_published_in_order_with_one_wait_for_all_its_confirms(
    publisher: Publisher, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert publisher.publish(batch(queue, 1)) == 1  # connects
    pumps = PumpCounter(monkeypatch)

    assert publisher.publish(batch(queue, 300, start=1)) == 300

    assert pumps.calls == 1
    assert numbers(queue) == list(range(301))
    body, headers = queue_messages(queue)[0]
    assert headers == {"attempt": 1}


def test_messages_are_persistent_json(publisher: Publisher, queue: str) -> None:
    publisher.publish(batch(queue, 1))

    connection, channel = amqp_channel()
    try:
        method, properties, _body = channel.basic_get(queue, auto_ack=True)
    finally:
        connection.close()
    assert method is not None
    assert (properties.delivery_mode, properties.content_type) == (2, "application/json")


def test_an_unroutable_message_ends_the_confirmed_prefix_there(publisher: Publisher, queue: str) -> None:
    missing = f"{SESSION_PREFIX}.no-such-queue"
    messages = [*batch(queue, 2), (missing, b'{"n": 99}', {}), *batch(queue, 2, start=2)]

    assert publisher.publish(messages) == 2

    assert numbers(queue)[:2] == [0, 1]  # what follows may be there too: a duplicate, never a loss


def test_after_a_failure_the_publisher_cools_down_and_leaves_the_rest_to_the_relay(
    publisher: Publisher, queue: str
) -> None:
    assert publisher.publish([(f"{SESSION_PREFIX}.no-such-queue", b"{}", {})]) == 0

    started = time.monotonic()
    assert publisher.publish(batch(queue, 3)) == 0
    assert time.monotonic() - started < 0.1
    assert numbers(queue) == []


def test_a_message_the_broker_refuses_ends_the_confirmed_prefix() -> None:
    full_after_two = declare_queue({"x-max-length": 2, "x-overflow": "reject-publish"})
    publisher = Publisher(AMQP_URL, timeout=2.0)
    try:
        assert publisher.publish(batch(full_after_two, 4)) == 2
        assert numbers(full_after_two) == [0, 1]
    finally:
        publisher.close()
        delete_queue(full_after_two)


def test_a_connection_the_broker_dropped_is_reopened_once_and_the_batch_sent_whole(
    publisher: Publisher, queue: str
) -> None:
    assert publisher.publish(batch(queue, 1)) == 1
    link = publisher._link
    assert link is not None
    link.connection._transport._sock.shutdown(socket.SHUT_RDWR)  # the broker restarted, say

    assert publisher.publish(batch(queue, 5, start=1)) == 5

    assert publisher._link is not link
    assert sorted(set(numbers(queue))) == list(range(6))


def test_with_the_broker_down_nothing_is_claimed_and_failing_is_quick() -> None:
    publisher = Publisher(DEAD_AMQP_URL, timeout=1.0)
    started = time.monotonic()

    assert publisher.publish([("anything", b"{}", {})]) == 0

    assert time.monotonic() - started < 5.0
    assert publisher.publish([("anything", b"{}", {})]) == 0  # cooling down: no new attempt
    publisher.close()


def test_a_forked_process_never_uses_its_parents_connection(publisher: Publisher, queue: str) -> None:
    publisher.publish(batch(queue, 1))
    inherited = publisher._link
    assert inherited is not None
    publisher._pid = -1  # as seen from a gunicorn worker just after the fork

    assert publisher.publish(batch(queue, 1, start=1)) == 1

    assert publisher._link is not inherited
    assert inherited.connection.is_open  # left alone: it is the parent's socket
    inherited.close()


def test_an_empty_batch_publishes_nothing(publisher: Publisher) -> None:
    assert publisher.publish([]) == 0
    assert publisher._link is None


def test_the_confirm_wait_is_bounded() -> None:
    assert Publisher(AMQP_URL, timeout=1.0).confirm_timeout == 5.0
    assert publisher_module.COOLDOWN_SECONDS > 0


# -- several broker nodes (AMQP_URL listing a cluster) ----------------------------------------

#: ``host:port`` of the test broker's first node, and its port.
LIVE_NODE = describe(broker_parameters(AMQP_URL, 1.0)[0])
LIVE_PORT = broker_parameters(AMQP_URL, 1.0)[0].port


def test_a_publisher_skips_a_dead_first_node_and_publishes_through_the_next(queue: str) -> None:
    publisher = Publisher(f"{DEAD_AMQP_URL},{AMQP_URL}", timeout=1.0)
    try:
        assert publisher.publish(batch(queue, 3)) == 3

        assert publisher.node == LIVE_NODE
        assert numbers(queue) == [0, 1, 2]
    finally:
        publisher.close()


def test_when_its_node_dies_the_publisher_moves_to_the_next_node_and_sends_the_batch_whole(queue: str) -> None:
    with TcpProxy(LIVE_PORT) as first_node:
        publisher = Publisher(f"amqp://guest:guest@127.0.0.1:{first_node.port}/%2F,{AMQP_URL}", timeout=1.0)
        try:
            assert publisher.publish(batch(queue, 1)) == 1
            assert publisher.node == f"127.0.0.1:{first_node.port}"

            first_node.cut()  # killed: its connections close, new ones are refused
            assert publisher.publish(batch(queue, 5, start=1)) == 5

            assert publisher.node == LIVE_NODE
            assert sorted(set(numbers(queue))) == list(range(6))
        finally:
            publisher.close()


def test_with_every_node_down_nothing_is_claimed_and_failing_is_quick() -> None:
    publisher = Publisher(f"{DEAD_AMQP_URL},amqp://guest:guest@127.0.0.1:2/%2F", timeout=1.0)
    started = time.monotonic()

    assert publisher.publish([("anything", b"{}", {})]) == 0

    assert time.monotonic() - started < 5.0
    assert publisher.node is None
    publisher.close()
