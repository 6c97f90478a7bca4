"""RabbitMQ destinations: ``amqp://user:pass@host/vhost?exchange=X&routing_key=K`` endpoints get
each event as one persistent, mandatory, confirmed message.

Against the machine's broker, in a vhost and with a user this module creates with
``rabbitmqctl`` and deletes afterwards: the service's own vhost and queues are never touched.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given, strategies as st
from standardwebhooks import Webhook

from tests.api_helpers import create_endpoint, send
from tests.conftest import wait_until
from tests.delivery.destination_helpers import SECRET, deliver, free_port, own_vhost, parcel, received
from tests.tcp_proxy import TcpProxy
from webhooks.delivery.destinations.rabbitmq import PATTERN, AmqpTarget, RabbitMQ
from webhooks.delivery.netguard import TargetPolicy
from webhooks.storage.models import Attempt, Delivery

BROKER_PORT = 5672
EXCHANGE = "orders"
ROUTING_KEY = "order.events"


@pytest.fixture(scope="module")
def broker() -> Iterator[SimpleNamespace]:
    """A vhost and user of this module's own, with an exchange bound to one queue."""
    with own_vhost(EXCHANGE, ROUTING_KEY) as vhost:
        yield vhost


def url_of(broker: SimpleNamespace, port: int = BROKER_PORT, password: str | None = None,
           routing_key: str = ROUTING_KEY, exchange: str = EXCHANGE) -> str:
    return (f"amqp://{broker.user}:{password or broker.password}@127.0.0.1:{port}/{quote(broker.vhost, safe='')}"
            f"?exchange={exchange}&routing_key={routing_key}")


def verified(properties: Any, body: bytes, secret: str) -> Any:
    return Webhook(secret).verify(body, {name: str(value) for name, value in properties.headers.items()})


def test_an_amqp_url_names_the_broker_vhost_credentials_exchange_and_routing_key() -> None:
    target = AmqpTarget.parse("amqps://app:p%40ss@mq.example/team%2Fa?exchange=orders&routing_key=paid")

    assert target == AmqpTarget("amqps", "mq.example", 5671, "team/a", "app", "p@ss", "orders", "paid")
    assert AmqpTarget.parse("amqp://u:p@mq.example?exchange=").vhost == "/"


@pytest.mark.parametrize(("url", "problem"), [
    ("amqp://mq.example/v?exchange=x", "names its user and password"),
    ("amqp://u:p@mq.example/v", "names its exchange"),
    ("amqp://u:p@mq.example/v?exchange=x&queue=q", "unknown parameter 'queue'"),
])
def test_a_bad_amqp_url_is_refused_naming_the_problem(url: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        AmqpTarget.parse(url)


def test_each_delivery_is_a_persistent_confirmed_message_that_verifies_from_its_headers(broker: SimpleNamespace) -> None:
    results = deliver(RabbitMQ, url_of(broker), parcel("evt_1"), parcel("evt_2"))

    assert [(r.error_class, r.status_code, r.body) for r in results] == [(None, None, b"confirmed by the broker")] * 2
    (first, body), (second, _) = received(broker)
    assert (first.message_id, second.message_id) == ("evt_1", "evt_2")
    assert first.delivery_mode == 2 and first.type == "order.paid" and first.content_type == "application/json"
    assert verified(first, body, SECRET) == {"type": "order.paid", "timestamp": "2026-11-26T00:00:00Z", "data": {"n": 1}}


@pytest.mark.parametrize(("change", "error_class"), [
    ({"routing_key": "nobody.listens"}, "unroutable"),
    ({"password": "wrong-password"}, "auth"),
    ({"exchange": "no-such-exchange"}, "refused"),
    ({"port": 0}, "connection"),
])
def test_each_failure_has_its_own_class_and_never_shows_the_password(
    broker: SimpleNamespace, change: dict[str, Any], error_class: str
) -> None:
    if change.get("port") == 0:
        change = {"port": free_port()}

    (result,) = deliver(RabbitMQ, url_of(broker, **change), parcel())

    assert result.error_class == error_class, result.error
    assert broker.password not in result.error and "wrong-password" not in result.error
    assert received(broker) == []


def test_one_connection_serves_every_delivery_to_a_destination(broker: SimpleNamespace) -> None:
    async def run() -> tuple[int, list[Any]]:
        destination = RabbitMQ(timeout=5, policy=TargetPolicy(allow_private=True))
        try:
            results = await asyncio.gather(*[destination.deliver(url_of(broker), parcel(f"evt_{n}")) for n in range(20)])
            return len(destination._links.all()), list(results)
        finally:
            await destination.close()

    links, results = asyncio.run(run())

    assert links == 1 and all(r.error_class is None for r in results)
    assert len(received(broker)) == 20


def test_events_arrive_confirmed_and_a_broker_that_is_down_fails_up_the_ladder_until_it_is_back(
    client: Any, tenant: Any, auth: Any, make_settings: Any, start_worker: Any, broker: SimpleNamespace
) -> None:
    port = free_port()
    endpoint = create_endpoint(client, auth(tenant), url_of(broker, port=port))
    start_worker(make_settings(ladder="1s,1s,2s,3s,5s"))
    event = send(client, auth(tenant), payload={"order": 42})
    wait_until(lambda: Attempt.select().where(Attempt.event == event["id"]).count() >= 2, timeout=15)

    with TcpProxy(BROKER_PORT, port=port):  # the broker is back on the endpoint's port
        delivery = wait_until(
            lambda: Delivery.get_or_none(Delivery.event == event["id"], Delivery.status == "delivered"), timeout=20)

    attempts = list(Attempt.select().where(Attempt.delivery == delivery.id).order_by(Attempt.attempt_no))
    assert [a.error_class for a in attempts[:2]] == ["connection", "connection"]
    assert attempts[-1].outcome == "delivered" and broker.password not in attempts[-1].url
    ((properties, body),) = received(broker)
    assert properties.message_id == event["id"]
    assert verified(properties, body, endpoint["secret"]) == {
        "type": "order.created", "timestamp": event["created_at"], "data": {"order": 42}}


def test_the_services_own_broker_vhost_is_refused_as_a_destination(client: Any, tenant: Any, auth: Any) -> None:
    own = client.post("/v1/endpoints", json={"url": "amqp://guest:guest@localhost:5672/%2F?exchange=&routing_key=x"},
                      headers=auth(tenant))
    other_vhost = client.post("/v1/endpoints", json={"url": "amqp://u:p@127.0.0.1:5672/theirs?exchange=x"},
                              headers=auth(tenant))

    assert own.status_code == 422
    assert own.json["errors"]["json"]["url"] == [
        "localhost:5672, vhost '/' is this service's own broker: use a broker or vhost of your own"]
    assert other_vhost.status_code == 201 and other_vhost.json["url"] == "amqp://u:***@127.0.0.1:5672/theirs?exchange=x"


@given(st.from_regex(PATTERN))
def test_every_url_the_documented_pattern_allows_is_read(url: str) -> None:
    AmqpTarget.parse(url)


def test_among_deliveries_at_once_only_the_unroutable_ones_fail(broker: SimpleNamespace) -> None:
    async def run() -> list[Any]:
        destination = RabbitMQ(timeout=5, policy=TargetPolicy(allow_private=True))
        try:
            urls = [url_of(broker, routing_key=ROUTING_KEY if n % 3 else "nobody.listens") for n in range(30)]
            return list(await asyncio.gather(*[destination.deliver(url, parcel(f"evt_{n}")) for n, url in enumerate(urls)]))
        finally:
            await destination.close()

    results = asyncio.run(run())

    assert [r.error_class for r in results] == [None if n % 3 else "unroutable" for n in range(30)]
    assert sorted(properties.message_id for properties, _ in received(broker)) == sorted(
        f"evt_{n}" for n in range(30) if n % 3)
