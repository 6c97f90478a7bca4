"""``POST /v1/endpoints/<id>/send-example``: the type's example, sent through the real pipeline to that
endpoint alone as a test event, signed so that the official ``standardwebhooks`` library verifies it."""

from __future__ import annotations

import json
from typing import Callable

import httpx
from flask.testing import FlaskClient
from standardwebhooks import Webhook

from tests.api_helpers import create_endpoint
from tests.catalog_helpers import ORDER, order_type
from tests.receivers import Receiver
from webhooks.config import Settings
from webhooks.listen import Feed
from webhooks.storage.models import Delivery


def test_an_example_reaches_a_real_receiver_verified_by_standardwebhooks_and_no_other_endpoint(
        client: FlaskClient, writer: dict[str, str], headers: dict[str, str], settings: Settings,
        start_worker: Callable[[Settings], object]) -> None:
    assert client.post("/v1/event-types", json=order_type(), headers=writer).status_code == 201
    with Receiver() as receiver, Receiver() as bystander:
        # Subscribed to other types, with a filter the example does not match: a test event still arrives.
        endpoint = create_endpoint(client, headers, url=receiver.url + "/hook", event_types=["invoice.paid"],
                                   filter={"data": {"amount": {"$gt": 10_000}}})
        other = create_endpoint(client, headers, url=bystander.url + "/hook")
        start_worker(settings)
        sent = client.post(f"/v1/endpoints/{endpoint['id']}/send-example", json={"event_type": "order.paid"},
                           headers=headers)
        assert sent.status_code == 202, sent.json
        assert sent.json["test"] is True and sent.json["payload"] == ORDER
        assert [d["endpoint_id"] for d in sent.json["deliveries"]] == [endpoint["id"]]

        request = receiver.wait_for(1, timeout=15)[0]
        verified = Webhook(endpoint["secret"]).verify(request.body, dict(request.headers))
        assert verified["type"] == "order.paid" and verified["data"] == ORDER
        assert request.headers["webhook-id"] == sent.json["id"]
    assert bystander.requests == []
    assert Delivery.select().where(Delivery.endpoint == other["id"]).count() == 0


def test_test_events_are_left_out_of_the_feed_unless_asked(client: FlaskClient, writer: dict[str, str],
                                                          headers: dict[str, str]) -> None:
    client.post("/v1/event-types", json=order_type(), headers=writer)
    endpoint = create_endpoint(client, headers)["id"]
    sent = client.post(f"/v1/endpoints/{endpoint}/send-example", json={"event_type": "order.paid"}, headers=headers)
    assert client.get("/v1/events", headers=headers).json["data"] == []
    with_tests = client.get("/v1/events?include_test=true", headers=headers).json["data"]
    assert [(e["id"], e["test"]) for e in with_tests] == [(sent.json["id"], True)]
    assert client.get(f"/v1/events/{sent.json['id']}", headers=headers).json["test"] is True


def test_an_operational_type_can_be_sent_as_an_example(client: FlaskClient, headers: dict[str, str]) -> None:
    endpoint = create_endpoint(client, headers)["id"]
    sent = client.post(f"/v1/endpoints/{endpoint}/send-example", json={"event_type": "endpoint.offline"},
                       headers=headers)
    assert sent.status_code == 202 and sent.json["event_type"] == "endpoint.offline"


def test_a_type_without_such_an_example_is_a_404(client: FlaskClient, writer: dict[str, str],
                                                 headers: dict[str, str]) -> None:
    client.post("/v1/event-types", json=order_type(examples=[]), headers=writer)
    endpoint = create_endpoint(client, headers)["id"]
    url = f"/v1/endpoints/{endpoint}/send-example"
    none = client.post(url, json={"event_type": "order.paid"}, headers=headers)
    assert none.status_code == 404 and "has no example" in json.dumps(none.json)
    unknown = client.post(url, json={"event_type": "not.there"}, headers=headers)
    assert unknown.status_code == 404 and "not in the catalog" in unknown.json["message"]
    assert client.post(url, json={"event_type": "endpoint.offline", "example": 3},
                       headers=headers).status_code == 404


def test_flask_listen_asks_for_test_events_only_when_told() -> None:
    with httpx.Client() as client:
        assert "include_test" not in Feed(client, 10).params
        assert Feed(client, 10, include_test=True).params["include_test"] == "true"
