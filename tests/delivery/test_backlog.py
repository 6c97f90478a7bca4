"""An endpoint's backlog in the database: what a worker moves out of memory comes back as the same messages."""

from __future__ import annotations

from typing import Any

from tests.conftest import queue_messages, wait_until
from tests.api_helpers import create_endpoint, send
from webhooks.delivery import backlog
from webhooks.messaging.messages import DeliveryMessage
from webhooks.storage.models import Delivery


def first_messages(settings: Any, endpoint_id: str) -> list[DeliveryMessage]:
    """The messages ingestion published for the endpoint, as a worker decodes them."""
    return [m for m in (DeliveryMessage.decode(body, headers) for body, headers in queue_messages(settings.topology.primary))
            if m.endpoint_id == endpoint_id]


def test_a_spilled_delivery_comes_back_as_the_message_it_left_as_payload_bytes_included(
    client: Any, tenant: Any, auth: Any, settings: Any
) -> None:
    endpoint = create_endpoint(client, auth(tenant), "http://127.0.0.1:9/hook")
    # Keys out of alphabetical order, nesting, non-ASCII: the bytes must be those of the first attempt.
    payloads = [{"z": n, "a": {"é": [1, 2.5, None], "b": "x\"y"}, "m": True} for n in range(3)]
    for payload in payloads:
        send(client, auth(tenant), payload=payload)
    wait_until(lambda: not Delivery.select().where(Delivery.enqueued_at.is_null()).exists())
    published = first_messages(settings, endpoint["id"])
    assert len(published) == 3

    assert backlog.spill(published) == [True] * 3
    fetched = backlog.take_spilled(endpoint["id"], 10)

    assert [m.encode() for m in fetched] == [m.encode() for m in published]
    assert backlog.take_spilled(endpoint["id"], 10) == [], "taken: no other worker gets them"
    assert backlog.spilled_endpoints() == []


def test_only_as_many_as_asked_come_back_oldest_first(client: Any, tenant: Any, auth: Any, settings: Any) -> None:
    endpoint = create_endpoint(client, auth(tenant), "http://127.0.0.1:9/hook")
    for n in range(5):
        send(client, auth(tenant), payload={"n": n})
    wait_until(lambda: not Delivery.select().where(Delivery.enqueued_at.is_null()).exists())
    backlog.spill(first_messages(settings, endpoint["id"]))

    first, rest = backlog.take_spilled(endpoint["id"], 2), backlog.take_spilled(endpoint["id"], 10)

    assert [m.payload for m in first + rest] == [b'{"n":%d}' % n for n in range(5)]


def spilled_backlog(client: Any, tenant: Any, auth: Any, settings: Any, count: int) -> str:
    """An endpoint with ``count`` deliveries spilled to the database; its id."""
    endpoint = create_endpoint(client, auth(tenant), "http://127.0.0.1:9/hook")
    for n in range(count):
        send(client, auth(tenant), payload={"n": n})
    wait_until(lambda: not Delivery.select().where(Delivery.enqueued_at.is_null()).exists())
    assert backlog.spill(first_messages(settings, endpoint["id"])) == [True] * count
    return endpoint["id"]


def test_a_backlog_given_back_by_a_worker_that_stops_is_there_for_any_worker_at_once(
    client: Any, tenant: Any, auth: Any, settings: Any
) -> None:
    endpoint_id = spilled_backlog(client, tenant, auth, settings, 3)
    taken = backlog.take_spilled(endpoint_id, 10)
    assert backlog.take_spilled(endpoint_id, 10) == []

    backlog.give_back(taken)

    assert backlog.spilled_endpoints() == [endpoint_id]
    assert [m.delivery_id for m in backlog.take_spilled(endpoint_id, 10)] == [m.delivery_id for m in taken]


def test_a_backlog_held_by_a_worker_that_died_is_taken_again_once_its_hold_ends(
    client: Any, tenant: Any, auth: Any, settings: Any
) -> None:
    endpoint_id = spilled_backlog(client, tenant, auth, settings, 3)
    taken = backlog.take_spilled(endpoint_id, 10, hold_seconds=0.0)  # a hold that has ended by the next look

    assert backlog.spilled_endpoints() == [endpoint_id], "the orphan scan finds it"
    assert [m.delivery_id for m in backlog.take_spilled(endpoint_id, 10)] == [m.delivery_id for m in taken]


def test_giving_back_leaves_alone_a_delivery_whose_attempt_was_recorded_meanwhile(
    client: Any, tenant: Any, auth: Any, settings: Any
) -> None:
    endpoint_id = spilled_backlog(client, tenant, auth, settings, 2)
    first, second = backlog.take_spilled(endpoint_id, 10)
    Delivery.update(spilled_at=None, attempts=1, status="delivered").where(Delivery.id == first.delivery_id).execute()

    backlog.give_back([first, second])

    assert [m.delivery_id for m in backlog.take_spilled(endpoint_id, 10)] == [second.delivery_id]
