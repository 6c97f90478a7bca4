"""The Svix API's messages are our events: sent with 202 (idempotent by ``eventId`` or the SDK's
idempotency key), listed newest first and read by id or eventId, with or without their content."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient
from svix.api import ApplicationIn, EndpointIn, MessageCreateOptions, MessageGetOptions, MessageIn, MessageListOptions, Svix
from svix.api.errors.http_error import HttpError

from webhooks.storage.models import Delivery


@pytest.fixture
def app_id(svix_client: Svix) -> str:
    return svix_client.application.create(ApplicationIn(name="Acme", uid="cus_42")).id


def test_a_message_is_an_event_delivered_to_each_subscribed_endpoint(svix_client: Svix, app_id: str) -> None:
    endpoint = svix_client.endpoint.create(app_id, EndpointIn(url="https://hooks.example.com/in",
                                                              event_types=["order.paid"]))

    message = svix_client.message.create("cus_42", MessageIn(event_type="order.paid", payload={"amount": 5},
                                                             event_id="order-1"), MessageCreateOptions(with_content=True))

    assert message.id.startswith("evt_") and message.event_id == "order-1" and message.payload == {"amount": 5}
    assert [d.endpoint_id for d in Delivery.select().where(Delivery.event == message.id)] == [endpoint.id]


def test_the_same_event_id_answers_the_first_message(svix_client: Svix, app_id: str, client: FlaskClient,
                                                     platform: dict[str, str]) -> None:
    first = svix_client.message.create(app_id, MessageIn(event_type="a.b", payload={}, event_id="once"))
    again = svix_client.message.create(app_id, MessageIn(event_type="a.b", payload={}, event_id="once"))
    assert again.id == first.id

    keyed = {**platform, "idempotency-key": "k-1"}
    one = client.post(f"/api/v1/app/{app_id}/msg", json={"eventType": "a.b", "payload": {}}, headers=keyed)
    two = client.post(f"/api/v1/app/{app_id}/msg", json={"eventType": "a.b", "payload": {}}, headers=keyed)
    assert one.status_code == two.status_code == 202 and one.json["id"] == two.json["id"]
    other = client.post(f"/api/v1/app/{app_id}/msg", json={"eventType": "a.b", "payload": {"x": 1}}, headers=keyed)
    assert other.status_code == 409 and other.json["code"] == "conflict"


def test_messages_are_listed_newest_first_and_read_by_id_or_event_id(svix_client: Svix, app_id: str) -> None:
    ids = [svix_client.message.create(app_id, MessageIn(event_type="a.b", payload={"n": n}, event_id=f"e{n}")).id
           for n in range(3)]

    page = svix_client.message.list(app_id, MessageListOptions(limit=2))
    assert [m.id for m in page.data] == ids[::-1][:2] and not page.done
    rest = svix_client.message.list(app_id, MessageListOptions(limit=2, iterator=page.iterator))
    assert [m.id for m in rest.data] == ids[:1] and rest.done
    assert svix_client.message.get(app_id, "e1").id == ids[1]
    assert svix_client.message.get(app_id, ids[1], MessageGetOptions(with_content=True)).payload == {"n": 1}
    bare = svix_client.message.list(app_id, MessageListOptions(with_content=False)).data[0]
    assert bare.payload == {} and bare.event_type == "a.b"


def test_a_message_may_create_its_application(svix_client: Svix) -> None:
    message = svix_client.message.create("cus_new", MessageIn(event_type="a.b", payload={},
                                                              application=ApplicationIn(name="New")))
    assert svix_client.application.get("cus_new").name == "New" and message.id.startswith("evt_")


def test_unknown_messages_and_unsupported_fields_are_clear_errors(svix_client: Svix, app_id: str, client: FlaskClient,
                                                                  platform: dict[str, str]) -> None:
    with pytest.raises(HttpError) as missing:
        svix_client.message.get(app_id, "nope")
    assert missing.value.status_code == 404
    channels = client.post(f"/api/v1/app/{app_id}/msg", json={"eventType": "a.b", "payload": {}, "channels": ["c"]},
                           headers=platform)
    assert channels.status_code == 422 and channels.json["detail"][0]["loc"] == ["body", "channels"]
    typeless = client.post(f"/api/v1/app/{app_id}/msg", json={"payload": {}}, headers=platform)
    assert typeless.status_code == 422 and typeless.json["detail"][0]["loc"] == ["body", "eventType"]
