"""Fallback while an endpoint is away: each event it misses (offline or disabled) is also delivered,
once, to its ``fallback_url``; it still gets everything, in order, when it is back.

Against the real services: a worker and a clock, RabbitMQ, local HTTP receivers and the machine's
Redis (a stream of the test's own as a fallback, with a password in its URL).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from standardwebhooks import Webhook

from tests.api_helpers import create_endpoint, send
from tests.conftest import wait_until
from tests.delivery.claim_helpers import LEASE, messages_of
from tests.delivery.destination_helpers import free_port
from tests.health.health_helpers import Switch, health
from tests.receivers import Receiver, RecordedRequest, always
from webhooks.delivery.claims import ClaimState, claim_many
from webhooks.storage.models import Attempt, Delivery, Endpoint, HealthChange

REDIS_PORT = 6379


@pytest.fixture
def stream() -> Iterator[str]:
    """A stream name of this test's own, deleted afterwards."""
    name = f"webhooks-fallback-{uuid.uuid4().hex}"
    yield name
    redis.Redis(port=REDIS_PORT).delete(name)


def stream_url(stream: str) -> str:
    """The stream as a destination, with a password (the local Redis's default user takes any)."""
    return f"redis://default:fallback-pw@127.0.0.1:{REDIS_PORT}/0?stream={stream}"


def stream_entries(stream: str) -> list[dict[bytes, bytes]]:
    return [fields for _, fields in redis.Redis(port=REDIS_PORT).xrange(stream)]


def verified_entry(fields: dict[bytes, bytes], secret: str) -> Any:
    headers = {"webhook-id": fields[b"id"].decode(), "webhook-timestamp": fields[b"timestamp"].decode(),
               "webhook-signature": fields[b"signature"].decode()}
    return Webhook(secret).verify(fields[b"body"], headers)


def verified_request(request: RecordedRequest, secret: str) -> Any:
    headers = {name: request.headers[name] for name in ("webhook-id", "webhook-timestamp", "webhook-signature")}
    return Webhook(secret).verify(request.body, headers)


def own_statuses(endpoint_id: str) -> dict[str, int]:
    """The statuses of the endpoint's own deliveries (not its fallback copies)."""
    query = Delivery.select().where((Delivery.endpoint == endpoint_id) & ~Delivery.fallback)
    return dict(Counter(delivery.status for delivery in query))


def copies(endpoint_id: str) -> list[Delivery]:
    return list(Delivery.select().where((Delivery.endpoint == endpoint_id) & Delivery.fallback))


def arrival_order(requests: list[RecordedRequest]) -> list[str]:
    """Event ids in the order they first reached a receiver."""
    return list(dict.fromkeys(request.headers["webhook-id"] for request in requests))


def test_while_an_endpoint_is_offline_each_event_reaches_its_fallback_once_and_the_endpoint_in_order_when_back(
    client: Any, tenant: Any, auth: Any, make_settings: Any, start_worker: Any, start_clock: Any, stream: str
) -> None:
    settings = make_settings(ladder="1s,2s,4s,8s")
    headers = auth(tenant)
    switch = Switch()
    with Receiver(switch) as receiver:
        start_worker(settings)
        start_clock(settings)
        endpoint = create_endpoint(client, headers, receiver.url, fallback_url=stream_url(stream))
        # Failing until the endpoint goes offline: these park at their next attempt.
        events = [send(client, headers, payload={"n": n})["id"] for n in range(8)]
        wait_until(lambda: health(endpoint["id"]) == "offline", timeout=15)
        # Posted while it is offline: these park at once.
        events += [send(client, headers, payload={"n": n})["id"] for n in range(8, 14)]
        wait_until(lambda: own_statuses(endpoint["id"]) == {"parked": 14}, timeout=30)
        wait_until(lambda: len(stream_entries(stream)) >= 14 and {d.status for d in copies(endpoint["id"])}
                   == {"delivered"}, timeout=20)

        told = stream_entries(stream)
        assert Counter(fields[b"id"].decode() for fields in told) == Counter(events)  # each once
        assert all(verified_entry(fields, endpoint["secret"])["type"] == "order.created" for fields in told)
        assert len(copies(endpoint["id"])) == 14

        calls_while_down = len(receiver.requests)
        switch.up = True
        wait_until(lambda: own_statuses(endpoint["id"]) == {"delivered": 14}, timeout=40)
        wait_until(lambda: health(endpoint["id"]) == "online", timeout=10)
        later = send(client, headers, payload={"n": "online"})
        wait_until(lambda: own_statuses(endpoint["id"]) == {"delivered": 15}, timeout=10)

    assert arrival_order(receiver.requests[calls_while_down:]) == [*events, later["id"]]  # all, in order
    assert len(stream_entries(stream)) == 14 and len(copies(endpoint["id"])) == 14  # none while online, no repeat
    changes = [(c.from_state, c.to_state)
               for c in HealthChange.select().where(HealthChange.endpoint == endpoint["id"]).order_by(HealthChange.id)]
    assert changes == [("online", "offline"), ("offline", "recovering"), ("recovering", "online")]  # copies moved none

    shown = client.get(f"/v1/events/{events[-1]}", headers=headers).json["deliveries"]
    assert sorted(d["fallback"] for d in shown) == [False, True]
    attempts = client.get(f"/v1/endpoints/{endpoint['id']}/attempts?limit=250", headers=headers).json["data"]
    fallback_attempts = [a for a in attempts if a["fallback"]]
    assert len(fallback_attempts) == 14
    assert {a["url"] for a in fallback_attempts} == {stream_url(stream).replace("fallback-pw", "***")}
    assert "fallback-pw" not in str(attempts)


def test_a_disabled_endpoints_events_go_to_its_fallback_signed_with_its_secret_then_to_it_when_enabled(
    client: Any, tenant: Any, auth: Any, settings: Any, start_worker: Any, start_clock: Any
) -> None:
    headers = auth(tenant)
    with Receiver() as main, Receiver() as spare:
        endpoint = create_endpoint(client, headers, main.url, fallback_url=f"{spare.url}/spare")
        assert client.patch(f"/v1/endpoints/{endpoint['id']}", json={"disabled": True}, headers=headers).status_code == 200
        start_worker(settings)
        start_clock(settings)
        events = [send(client, headers, payload={"n": n})["id"] for n in range(3)]
        wait_until(lambda: len(spare.requests) >= 3)
        assert main.requests == []
        assert sorted(arrival_order(spare.requests)) == sorted(events) and len(spare.requests) == 3
        assert sorted(verified_request(r, endpoint["secret"])["data"]["n"] for r in spare.requests) == [0, 1, 2]
        assert {r.path for r in spare.requests} == {"/spare"}

        assert client.patch(f"/v1/endpoints/{endpoint['id']}", json={"disabled": False}, headers=headers).status_code == 200
        wait_until(lambda: own_statuses(endpoint["id"]) == {"delivered": 3}, timeout=20)

    assert arrival_order(main.requests) == events
    assert len(spare.requests) == 3


def test_an_online_endpoint_makes_no_fallback_copy(
    client: Any, tenant: Any, auth: Any, settings: Any, start_worker: Any
) -> None:
    headers = auth(tenant)
    with Receiver() as main, Receiver() as spare:
        endpoint = create_endpoint(client, headers, main.url, fallback_url=spare.url)
        start_worker(settings)
        accepted = [send(client, headers) for _ in range(3)]
        wait_until(lambda: own_statuses(endpoint["id"]) == {"delivered": 3})

    assert copies(endpoint["id"]) == [] and spare.requests == []
    assert all(d["fallback"] is False for event in accepted for d in event["deliveries"])


def test_a_410_that_disables_the_endpoint_tells_the_fallback_about_its_event(
    client: Any, tenant: Any, auth: Any, settings: Any, start_worker: Any, start_clock: Any
) -> None:
    headers = auth(tenant)
    with Receiver(always(410)) as gone, Receiver() as spare:
        endpoint = create_endpoint(client, headers, gone.url, fallback_url=spare.url)
        start_worker(settings)
        start_clock(settings)  # the relay publishes the copy the 410's record made
        event = send(client, headers)
        wait_until(lambda: len(spare.requests) >= 1, timeout=15)

    assert health(endpoint["id"]) == "disabled" and own_statuses(endpoint["id"]) == {"parked": 1}
    assert arrival_order(spare.requests) == [event["id"]] and len(gone.requests) == 1


def test_a_failing_fallback_climbs_its_ladder_and_leaves_the_endpoints_presence_alone(
    client: Any, tenant: Any, auth: Any, make_settings: Any, start_worker: Any
) -> None:
    headers = auth(tenant)
    down = f"http://127.0.0.1:{free_port()}/nobody-home"
    endpoint = create_endpoint(client, headers, "http://127.0.0.1:9/main", fallback_url=down)
    client.patch(f"/v1/endpoints/{endpoint['id']}", json={"disabled": True}, headers=headers)
    start_worker(make_settings(ladder="500ms,500ms"))
    event = send(client, headers)

    (copy,) = wait_until(lambda: [d for d in copies(endpoint["id"]) if d.status == "failed"], timeout=15)
    attempts = list(Attempt.select().where(Attempt.delivery == copy.id).order_by(Attempt.attempt_no))
    assert [a.outcome for a in attempts] == ["retrying", "retrying", "failed"]
    assert all(a.fallback and a.url == down and a.error_class == "connection" for a in attempts)
    row = Endpoint.get_by_id(endpoint["id"])
    assert row.disabled and row.consecutive_failures == 0 and row.failing_since is None
    assert own_statuses(endpoint["id"]) == {"parked": 1} and copy.event_id == event["id"]


def test_a_delivery_that_parks_again_in_a_second_outage_makes_no_second_copy(tenant: Any) -> None:
    (message,) = messages_of(tenant, 1)
    Endpoint.update(fallback_url="http://127.0.0.1:9/spare", health="offline").where(
        Endpoint.id == message.endpoint_id).execute()

    (first,) = claim_many([message], LEASE)
    Delivery.update(status="retrying").where(Delivery.id == message.delivery_id).execute()  # released, failing again
    (again,) = claim_many([message], LEASE)

    assert first.state is ClaimState.PARKED and first.fallback_copy is not None
    assert again.state is ClaimState.PARKED and again.fallback_copy is None
    (copy,) = copies(message.endpoint_id)
    assert (copy.id, copy.event_id, copy.status) == (first.fallback_copy.delivery_id, message.event_id, "pending")
    (leased,) = claim_many([first.fallback_copy], LEASE)  # the copy goes to the fallback, the endpoint offline
    assert leased.state is ClaimState.CLAIMED and leased.fallback and leased.endpoint.url == "http://127.0.0.1:9/spare"


def test_a_copy_whose_fallback_was_removed_is_cancelled_and_the_endpoints_own_delivery_waits(tenant: Any) -> None:
    (message,) = messages_of(tenant, 1)
    Endpoint.update(fallback_url="http://127.0.0.1:9/spare", disabled=True).where(
        Endpoint.id == message.endpoint_id).execute()
    (parked,) = claim_many([message], LEASE)
    Endpoint.update(fallback_url=None).where(Endpoint.id == message.endpoint_id).execute()

    (copy_claim,) = claim_many([parked.fallback_copy], LEASE)

    assert copy_claim.state is ClaimState.CANCELLED
    assert [d.status for d in copies(message.endpoint_id)] == ["cancelled"]
    assert own_statuses(message.endpoint_id) == {"parked": 1}


# -- registering a fallback ------------------------------------------------------------------------


def test_a_fallback_url_is_checked_like_the_url_and_can_be_removed(
    client: Any, tenant: Any, auth: Any, make_app: Any
) -> None:
    headers = auth(tenant)
    bad = client.post("/v1/endpoints", json={"url": "http://127.0.0.1:9/a", "fallback_url": "ftp://x/y"}, headers=headers)
    own_broker = client.post("/v1/endpoints", json={
        "url": "http://127.0.0.1:9/a", "fallback_url": "amqp://guest:guest@localhost:5672/%2F?exchange=amq.topic"},
        headers=headers)
    guarded = make_app(allow_private_targets=False).test_client().post(
        "/v1/endpoints", json={"url": "https://8.8.8.8/a", "fallback_url": "http://127.0.0.1/x"}, headers=headers)

    assert bad.status_code == 422 and list(bad.json["errors"]["json"]) == ["fallback_url"]
    assert own_broker.status_code == 422 and "own broker" in own_broker.json["errors"]["json"]["fallback_url"][0]
    assert guarded.status_code == 422 and "loopback" in guarded.json["errors"]["json"]["fallback_url"][0]
    created = create_endpoint(client, headers, "http://127.0.0.1:9/a", fallback_url="http://127.0.0.1:9/b")
    assert created["fallback_url"] == "http://127.0.0.1:9/b"
    removed = client.patch(f"/v1/endpoints/{created['id']}", json={"fallback_url": None}, headers=headers)
    assert removed.status_code == 200 and removed.json["fallback_url"] is None
    assert Endpoint.get_by_id(created["id"]).fallback_url is None
