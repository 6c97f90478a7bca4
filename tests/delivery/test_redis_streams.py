"""Redis-stream destinations: ``redis://…?stream=NAME`` endpoints get each event as one XADD.

Against the machine's Redis (127.0.0.1:6379); each test writes to a stream of its own and
deletes it. Loopback is reached as the HTTP tests reach their receivers: with
``ALLOW_PRIVATE_TARGETS`` (the ``settings`` fixture), the production policy refusing it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, strategies as st
import redis
from standardwebhooks import Webhook

from tests.api_helpers import create_endpoint, send
from tests.conftest import wait_until
from tests.delivery.destination_helpers import SECRET, deliver, free_port, parcel
from tests.tcp_proxy import TcpProxy
from webhooks.delivery.destinations import check_target
from webhooks.delivery.destinations.redis_streams import PATTERN, POOL_SIZE, RedisStreams, RedisTarget, _Pool
from webhooks.delivery.netguard import BlockedAddress, TargetPolicy
from webhooks.storage.models import Attempt, Delivery

REDIS_PORT = 6379


@pytest.fixture
def stream() -> Iterator[str]:
    """A stream name of this test's own, deleted afterwards."""
    name = f"webhooks-test-{uuid.uuid4().hex}"
    yield name
    redis.Redis(port=REDIS_PORT).delete(name)


def entries(name: str) -> list[tuple[bytes, dict[bytes, bytes]]]:
    return redis.Redis(port=REDIS_PORT).xrange(name)


def verified(entry: dict[bytes, bytes], secret: str) -> Any:
    """The entry checked as a Standard Webhooks request, with the official library."""
    headers = {"webhook-id": entry[b"id"].decode(), "webhook-timestamp": entry[b"timestamp"].decode(),
               "webhook-signature": entry[b"signature"].decode()}
    return Webhook(secret).verify(entry[b"body"], headers)


# -- the URL ---------------------------------------------------------------------------------------


def test_a_redis_url_names_host_port_database_credentials_stream_and_length() -> None:
    target = RedisTarget.parse("rediss://app:p%40ss@cache.example:6380/3?stream=orders&maxlen=1000")

    assert target == RedisTarget("rediss", "cache.example", 6380, 3, "app", "p@ss", "orders", 1000)
    assert target.tls
    assert RedisTarget.parse("redis://cache.example?stream=s") == RedisTarget(
        "redis", "cache.example", 6379, 0, None, None, "s", None)


@pytest.mark.parametrize(("url", "problem"), [
    ("redis://cache.example/0", "names its stream: ?stream=NAME"),
    ("redis://cache.example/0?stream=", "names its stream"),
    ("redis://cache.example/zero?stream=s", "database number, not '/zero'"),
    ("redis://cache.example/0?stream=s&maxlen=-1", "maxlen= must be a positive whole number"),
    ("redis://cache.example/0?stream=s&key=x", "unknown parameter 'key'"),
    ("redis://cache.example/0?stream=a&stream=b", "stream= is given more than once"),
    ("redis:///0?stream=s", "no host"),
])
def test_a_bad_redis_url_is_refused_naming_the_problem(url: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem.replace("?", r"\?")):
        RedisTarget.parse(url)


def test_the_api_takes_a_redis_url_and_never_shows_its_password_again(client: Any, tenant: Any, auth: Any) -> None:
    url = f"redis://app:hunter2@127.0.0.1:{REDIS_PORT}/0?stream=orders"

    created = create_endpoint(client, auth(tenant), url)
    listed = client.get("/v1/endpoints", headers=auth(tenant)).json
    refused = client.post("/v1/endpoints", json={"url": "redis://127.0.0.1/0"}, headers=auth(tenant))

    assert created["url"] == f"redis://app:***@127.0.0.1:{REDIS_PORT}/0?stream=orders"
    assert "hunter2" not in str(listed)
    assert refused.status_code == 422
    assert refused.json["errors"]["json"]["url"] == ["a Redis URL names its stream: ?stream=NAME"]


def test_the_ssrf_rules_apply_to_a_redis_host_at_registration_and_at_delivery(stream: str) -> None:
    url = f"redis://127.0.0.1:{REDIS_PORT}/0?stream={stream}"

    with pytest.raises(BlockedAddress, match="loopback"):
        check_target(url, TargetPolicy())
    (result,) = deliver(RedisStreams, url, parcel(), policy=TargetPolicy())

    assert result.error_class == "blocked_address" and "loopback" in result.error
    assert entries(stream) == []


# -- one destination -------------------------------------------------------------------------------


def test_each_delivery_is_one_entry_that_verifies_and_its_id_is_the_response(stream: str) -> None:
    first, second = deliver(RedisStreams, f"redis://127.0.0.1:{REDIS_PORT}/0?stream={stream}", parcel("evt_1"), parcel("evt_2"))

    (one, one_fields), (two, _) = entries(stream)
    assert first.error_class is None and first.status_code is None and first.body == one
    assert second.body == two
    assert one_fields[b"id"] == b"evt_1" and one_fields[b"type"] == b"order.paid"
    assert verified(one_fields, SECRET) == {"type": "order.paid", "timestamp": "2026-11-26T00:00:00Z", "data": {"n": 1}}


def test_maxlen_trims_the_stream(stream: str) -> None:
    url = f"redis://127.0.0.1:{REDIS_PORT}/0?stream={stream}&maxlen=1"
    redis.Redis(port=REDIS_PORT).xadd(stream, {"old": "entry"})  # MAXLEN ~ trims whole nodes: make it exact here
    results = deliver(RedisStreams, url, *[parcel(f"evt_{n}") for n in range(3)])

    assert all(result.error_class is None for result in results)
    assert len(entries(stream)) <= 4  # approximate trimming keeps at most one node's worth


def test_more_deliveries_at_once_than_the_pool_has_connections_wait_for_one_and_all_arrive(stream: str) -> None:
    # An endpoint may have ENDPOINT_MAX_IN_FLIGHT (128) calls in flight: more than redis-py's pool allows by default
    # (100, beyond which it raised MaxConnectionsError) and more than POOL_SIZE.
    count = max(150, 2 * POOL_SIZE)

    async def run() -> list[Any]:
        destination = RedisStreams(timeout=5, policy=TargetPolicy(allow_private=True))
        try:
            url = f"redis://127.0.0.1:{REDIS_PORT}/0?stream={stream}"
            return await asyncio.gather(*(destination.deliver(url, parcel(f"evt_{n}")) for n in range(count)))
        finally:
            await destination.close()

    results = asyncio.run(run())

    assert [result.error_class for result in results] == [None] * count
    assert sorted(fields[b"id"] for _, fields in entries(stream)) == sorted(f"evt_{n}".encode() for n in range(count))


def test_deliveries_cut_by_their_deadline_give_their_connections_back_and_the_next_ones_all_arrive(stream: str) -> None:
    # More deliveries than the pool has connections hang on a Redis that accepts and never answers: each ends at
    # its deadline, on a connection or waiting for one. Once Redis answers again, as many deliveries all arrive.
    count = POOL_SIZE + 10

    async def run() -> tuple[list[Any], list[Any]]:
        destination = RedisStreams(timeout=2, policy=TargetPolicy(allow_private=True))
        try:
            with TcpProxy(REDIS_PORT) as proxy:
                url = f"redis://127.0.0.1:{proxy.port}/0?stream={stream}"
                proxy.stalled = True
                cut = await asyncio.gather(*(destination.deliver(url, parcel(f"cut_{n}")) for n in range(count)))
                proxy.stalled = False
                after = await asyncio.gather(*(destination.deliver(url, parcel(f"evt_{n}")) for n in range(count)))
                return cut, after
        finally:
            await destination.close()

    cut, after = asyncio.run(run())

    assert {result.error_class for result in cut} == {"timeout"}
    assert [result.error_class for result in after] == [None] * count
    assert sorted(fields[b"id"] for _, fields in entries(stream)) == sorted(f"evt_{n}".encode() for n in range(count))


def test_a_key_that_is_not_a_stream_is_refused_and_the_next_delivery_is_added(stream: str) -> None:
    url = f"redis://127.0.0.1:{REDIS_PORT}/0?stream={stream}"

    async def run() -> list[Any]:
        destination = RedisStreams(timeout=5, policy=TargetPolicy(allow_private=True))
        try:
            redis.Redis(port=REDIS_PORT).set(stream, "a string, not a stream")
            refused = await destination.deliver(url, parcel("evt_1"))
            redis.Redis(port=REDIS_PORT).delete(stream)
            return [refused, await destination.deliver(url, parcel("evt_2"))]
        finally:
            await destination.close()

    refused, added = asyncio.run(run())

    assert refused.error_class == "refused" and "WRONGTYPE" in refused.error and stream in refused.error
    assert added.error_class is None and [fields[b"id"] for _, fields in entries(stream)] == [b"evt_2"]


def test_a_connection_handed_to_a_waiter_whose_deadline_strikes_goes_on_to_the_next() -> None:
    async def run() -> None:
        pool = _Pool(object, size=1)
        connection = await pool.take()
        first, second = asyncio.create_task(pool.take()), asyncio.create_task(pool.take())
        await asyncio.sleep(0)  # both wait for the pool's one connection
        pool.give(connection)  # to the first...
        first.cancel()  # ...whose deadline strikes before it runs

        assert await asyncio.wait_for(second, 1) is connection
        assert first.cancelled()

    asyncio.run(run())


def test_a_redis_that_does_not_answer_is_a_connection_failure(stream: str) -> None:
    (result,) = deliver(RedisStreams, f"redis://127.0.0.1:{free_port()}/0?stream={stream}", parcel())

    assert result.error_class == "connection" and "Connection refused" in result.error


def test_a_wrong_password_is_an_auth_failure_that_does_not_show_the_password(stream: str) -> None:
    (result,) = deliver(RedisStreams, f"redis://nobody:wrong-password@127.0.0.1:{REDIS_PORT}/0?stream={stream}", parcel())

    assert result.error_class == "auth" and "wrong-password" not in result.error


# -- through the service ---------------------------------------------------------------------------


def test_events_arrive_in_the_stream_signed_for_standardwebhooks(
    client: Any, tenant: Any, auth: Any, settings: Any, start_worker: Any, stream: str
) -> None:
    endpoint = create_endpoint(client, auth(tenant), f"redis://127.0.0.1:{REDIS_PORT}/0?stream={stream}")
    start_worker(settings)
    event = send(client, auth(tenant), payload={"order": 42})

    delivery = wait_until(lambda: Delivery.get_or_none(Delivery.event == event["id"], Delivery.status == "delivered"))
    ((entry_id, fields),) = entries(stream)
    assert verified(fields, endpoint["secret"]) == {"type": "order.created", "timestamp": event["created_at"],
                                                    "data": {"order": 42}}
    assert fields[b"id"].decode() == event["id"]
    (attempt,) = Attempt.select().where(Attempt.delivery == delivery.id)
    assert attempt.response_body == entry_id.decode() and attempt.error_class is None


def test_a_redis_that_is_down_fails_up_the_ladder_and_gets_the_event_when_it_is_back(
    client: Any, tenant: Any, auth: Any, make_settings: Any, start_worker: Any, stream: str
) -> None:
    port = free_port()
    create_endpoint(client, auth(tenant), f"redis://127.0.0.1:{port}/0?stream={stream}")
    start_worker(make_settings(ladder="1s,1s,2s,3s,5s"))
    event = send(client, auth(tenant))
    wait_until(lambda: Attempt.select().where(Attempt.event == event["id"]).count() >= 2, timeout=15)

    with TcpProxy(REDIS_PORT, port=port):  # Redis is back on the endpoint's port
        delivery = wait_until(
            lambda: Delivery.get_or_none(Delivery.event == event["id"], Delivery.status == "delivered"), timeout=20)

    attempts = list(Attempt.select().where(Attempt.delivery == delivery.id).order_by(Attempt.attempt_no))
    assert [a.error_class for a in attempts[:2]] == ["connection", "connection"]
    assert [a.outcome for a in attempts] == ["retrying"] * (len(attempts) - 1) + ["delivered"]
    ((entry_id, fields),) = entries(stream)
    assert fields[b"id"].decode() == event["id"] and attempts[-1].response_body == entry_id.decode()


@given(st.from_regex(PATTERN))
def test_every_url_the_documented_pattern_allows_is_read(url: str) -> None:
    RedisTarget.parse(url)
