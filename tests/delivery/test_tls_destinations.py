"""TLS to Redis-stream (``rediss://``) and RabbitMQ (``amqps://``) destinations, end to end.

A CA of the test's own signs a certificate for ``localhost``; a TLS-terminating proxy in this process
(``TlsProxy``) forwards the plain bytes to the machine's Redis (127.0.0.1:6379) or broker (127.0.0.1:5672),
so the destinations speak TLS to a real server. Both trust certifi's bundle and nothing else: a test trusts
its CA by making ``certifi.where()`` answer a bundle that holds it. Loopback is allowed as in the other
destination tests (``TargetPolicy(allow_private=True)``, the default of ``deliver``).
"""

from __future__ import annotations

import asyncio
import ssl
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import quote

import certifi
import pytest
import redis
from standardwebhooks import Webhook

from tests.delivery.destination_helpers import (
    SECRET, CertificateAuthority, TlsProxy, deliver, own_vhost, parcel, received,
)
from webhooks.delivery.destinations.rabbitmq import CONFIRMED, RabbitMQ
from webhooks.delivery.destinations.redis_streams import RedisStreams
from webhooks.delivery.netguard import TargetPolicy

REDIS_PORT = 6379
BROKER_PORT = 5672
EXCHANGE = "orders"
ROUTING_KEY = "order.events"
#: What a delivery answers with the order event ``parcel()`` makes, once verified.
ORDER_PAID = {"type": "order.paid", "timestamp": "2026-11-26T00:00:00Z", "data": {"n": 1}}


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return CertificateAuthority(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def certifi_bundle() -> Path:
    """certifi's own bundle, as the destinations read it when no test changes it."""
    return Path(certifi.where())


@pytest.fixture
def trust(monkeypatch: pytest.MonkeyPatch, ca: CertificateAuthority, certifi_bundle: Path) -> Callable[[], None]:
    """Call it to make the destinations trust the test CA (with certifi's CAs): the bundle they read has it."""
    def trusted() -> None:
        monkeypatch.setattr(certifi, "where", lambda: str(ca.bundle(certifi_bundle)))

    return trusted


@pytest.fixture(scope="module")
def broker() -> Iterator[SimpleNamespace]:
    """A vhost and user of this module's own, with an exchange bound to the queue ``received``."""
    with own_vhost(EXCHANGE, ROUTING_KEY) as vhost:
        yield vhost


@pytest.fixture
def stream() -> Iterator[str]:
    """A stream name of this test's own, deleted afterwards."""
    name = f"webhooks-tls-test-{uuid.uuid4().hex}"
    yield name
    redis.Redis(port=REDIS_PORT).delete(name)


def rediss_url(port: int, stream: str, credentials: str = "") -> str:
    return f"rediss://{credentials}localhost:{port}/0?stream={stream}"


def amqps_url(broker: SimpleNamespace, port: int) -> str:
    return (f"amqps://{broker.user}:{broker.password}@localhost:{port}/{quote(broker.vhost, safe='')}"
            f"?exchange={EXCHANGE}&routing_key={ROUTING_KEY}")


# -- trusted: delivered ----------------------------------------------------------------------------


def test_a_rediss_delivery_lands_in_the_stream_over_tls_checked_against_the_host_name(
    ca: CertificateAuthority, trust: Callable[[], None], stream: str
) -> None:
    trust()
    with TlsProxy(REDIS_PORT, ca.server_context("localhost")) as proxy:
        first, second = deliver(RedisStreams, rediss_url(proxy.port, stream), parcel("evt_1"), parcel("evt_2"))

    assert (first.error_class, second.error_class) == (None, None), (first.error, second.error)
    (one, fields), (two, _) = redis.Redis(port=REDIS_PORT).xrange(stream)
    assert (first.body, second.body) == (one, two)
    assert fields[b"id"] == b"evt_1" and fields[b"type"] == b"order.paid"
    headers = {"webhook-id": fields[b"id"].decode(), "webhook-timestamp": fields[b"timestamp"].decode(),
               "webhook-signature": fields[b"signature"].decode()}
    assert Webhook(SECRET).verify(fields[b"body"], headers) == ORDER_PAID
    assert proxy.server_names == ["localhost"]  # one pooled connection; SNI is the URL's host, not the address


def test_an_amqps_delivery_is_confirmed_and_consumed_over_tls_checked_against_the_host_name(
    ca: CertificateAuthority, trust: Callable[[], None], broker: SimpleNamespace
) -> None:
    trust()
    with TlsProxy(BROKER_PORT, ca.server_context("localhost")) as proxy:
        results = deliver(RabbitMQ, amqps_url(broker, proxy.port), parcel("evt_1"), parcel("evt_2"))

    assert [(r.error_class, r.body) for r in results] == [(None, CONFIRMED)] * 2, [r.error for r in results]
    (first, body), (second, _) = received(broker)
    assert (first.message_id, second.message_id) == ("evt_1", "evt_2")
    assert Webhook(SECRET).verify(body, {name: str(value) for name, value in first.headers.items()}) == ORDER_PAID
    assert proxy.server_names == ["localhost"]  # one connection for both


def test_rediss_connections_at_once_share_one_tls_context(
    ca: CertificateAuthority, trust: Callable[[], None], stream: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Making one reads the CA files (some 70 ms on the event loop here): redis-py's own made one for every connection.
    trust()
    made: list[object] = []
    create = ssl.create_default_context
    monkeypatch.setattr(ssl, "create_default_context", lambda *args, **kwargs: made.append(kwargs) or create(*args, **kwargs))

    async def ten_at_once(url: str) -> list[str | None]:
        destination = RedisStreams(timeout=5, policy=TargetPolicy(allow_private=True))
        try:
            results = await asyncio.gather(*(destination.deliver(url, parcel(f"evt_{n}")) for n in range(10)))
            return [result.error_class for result in results]
        finally:
            await destination.close()

    with TlsProxy(REDIS_PORT, ca.server_context("localhost")) as proxy:
        assert asyncio.run(ten_at_once(rediss_url(proxy.port, stream))) == [None] * 10

    assert len(proxy.server_names) > 1 and len(made) == 1
    assert len(redis.Redis(port=REDIS_PORT).xrange(stream)) == 10


# -- not trusted: a TLS failure --------------------------------------------------------------------


@pytest.mark.parametrize("case", ["untrusted CA", "certificate for another host", "CA trusted only by SSL_CERT_FILE"])
@pytest.mark.parametrize("kind", ["redis", "amqp"])
def test_a_certificate_that_does_not_verify_is_a_tls_failure_naming_the_host_and_never_the_password(
    ca: CertificateAuthority, trust: Callable[[], None], broker: SimpleNamespace, stream: str,
    monkeypatch: pytest.MonkeyPatch, case: str, kind: str,
) -> None:
    host = "localhost"
    if case == "certificate for another host":
        trust()
        host = "elsewhere.test"
    elif case == "CA trusted only by SSL_CERT_FILE":  # the environment does not change whom a destination trusts
        monkeypatch.setenv("SSL_CERT_FILE", str(ca.pem))
    target_port, destination = (REDIS_PORT, RedisStreams) if kind == "redis" else (BROKER_PORT, RabbitMQ)

    with TlsProxy(target_port, ca.server_context(host)) as proxy:
        url = (rediss_url(proxy.port, stream, credentials="app:secret-password@") if kind == "redis"
               else amqps_url(broker, proxy.port))
        (result,) = deliver(destination, url, parcel())

    assert result.error_class == "tls", result.error
    assert f"localhost:{proxy.port}" in result.error and "certificate verify failed" in result.error
    if case == "certificate for another host":
        assert "Hostname mismatch" in result.error
    assert "secret-password" not in result.error and broker.password not in result.error
    assert proxy.server_names == ["localhost"]
    assert redis.Redis(port=REDIS_PORT).xrange(stream) == [] and received(broker) == []
