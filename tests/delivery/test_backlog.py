"""An endpoint's backlog in the database: what a worker moves out of memory comes back as the same messages."""

from __future__ import annotations

from typing import Any

from tests.conftest import queue_messages, wait_until
from tests.delivery.test_delivery_e2e import register, send
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
    endpoint = register(client, auth(tenant), "http://127.0.0.1:9/hook")
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
    assert not Delivery.select().where(Delivery.spilled_at.is_null(False)).exists()
    assert backlog.take_spilled(endpoint["id"], 10) == []


def test_only_as_many_as_asked_come_back_oldest_first(client: Any, tenant: Any, auth: Any, settings: Any) -> None:
    endpoint = register(client, auth(tenant), "http://127.0.0.1:9/hook")
    for n in range(5):
        send(client, auth(tenant), payload={"n": n})
    wait_until(lambda: not Delivery.select().where(Delivery.enqueued_at.is_null()).exists())
    backlog.spill(first_messages(settings, endpoint["id"]))

    first, rest = backlog.take_spilled(endpoint["id"], 2), backlog.take_spilled(endpoint["id"], 10)

    assert [m.payload for m in first + rest] == [b'{"n":%d}' % n for n in range(5)]
