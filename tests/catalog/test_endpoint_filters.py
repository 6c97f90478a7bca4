"""An endpoint's ``filter``: checked when written (a 422 with its path), evaluated at fan-out (no match,
no delivery row), removed with ``{}`` or ``null``; ``POST /v1/endpoints/<id>/filter/test`` explains it."""

from __future__ import annotations

from flask.testing import FlaskClient

from tests.api_helpers import create_endpoint, post_event
from webhooks.storage.models import Delivery

PAID_OVER_100 = {"data": {"status": "paid", "amount": {"$gt": 100}}}


def test_a_filter_is_stored_and_shown(client: FlaskClient, headers: dict[str, str]) -> None:
    endpoint = create_endpoint(client, headers, filter=PAID_OVER_100)
    assert endpoint["filter"] == PAID_OVER_100
    assert client.get(f"/v1/endpoints/{endpoint['id']}", headers=headers).json["filter"] == PAID_OVER_100


def test_a_filter_that_cannot_be_used_is_a_422_naming_its_path(client: FlaskClient, headers: dict[str, str]) -> None:
    response = client.post("/v1/endpoints", json={"url": "http://127.0.0.1:9/hook",
                                                  "filter": {"data": {"amount": {"$gte": [1]}}}}, headers=headers)
    assert response.status_code == 422
    assert response.json["errors"]["json"]["filter"] == {"data.amount.$gte": ["takes a number or a string, not [1]"]}
    unknown = client.post("/v1/endpoints", json={"url": "http://127.0.0.1:9/hook",
                                                 "filter": {"data": {"a": {"$regex": "x"}}}}, headers=headers)
    assert unknown.status_code == 422 and "unknown operator '$regex'" in unknown.json["errors"]["json"]["filter"][
        "data.a.$regex"][0]


def test_an_endpoint_whose_filter_does_not_match_gets_no_delivery_row(client: FlaskClient,
                                                                      headers: dict[str, str]) -> None:
    filtered = create_endpoint(client, headers, filter=PAID_OVER_100)["id"]
    everything = create_endpoint(client, headers)["id"]
    small = post_event(client, headers, "order.updated", {"status": "paid", "amount": 50}).json
    assert [d["endpoint_id"] for d in small["deliveries"]] == [everything]
    assert Delivery.select().where(Delivery.endpoint == filtered).count() == 0
    big = post_event(client, headers, "order.updated", {"status": "paid", "amount": 500}).json
    assert sorted(d["endpoint_id"] for d in big["deliveries"]) == sorted([filtered, everything])


def test_a_filter_matching_nothing_creates_no_delivery_in_a_batch(client: FlaskClient,
                                                                   headers: dict[str, str]) -> None:
    endpoint = create_endpoint(client, headers, filter={"type": "never.sent"})["id"]
    batch = [{"event_type": "order.updated", "payload": {"n": n}} for n in range(20)]
    answer = client.post("/v1/events/batch", json=batch, headers=headers)
    assert answer.status_code == 202
    assert all(item["deliveries"] == [] for item in answer.json["data"])
    assert Delivery.select().where(Delivery.endpoint == endpoint).count() == 0


def test_the_filter_applies_after_the_subscription(client: FlaskClient, headers: dict[str, str]) -> None:
    create_endpoint(client, headers, event_types=["invoice.paid"], filter={"data": {"amount": {"$gt": 0}}})
    assert post_event(client, headers, "order.paid", {"amount": 5}).json["deliveries"] == []


def test_an_empty_object_or_null_removes_the_filter(client: FlaskClient, headers: dict[str, str]) -> None:
    endpoint = create_endpoint(client, headers, filter=PAID_OVER_100)["id"]
    for removal in ({}, None):
        client.patch(f"/v1/endpoints/{endpoint}", json={"filter": PAID_OVER_100}, headers=headers)
        changed = client.patch(f"/v1/endpoints/{endpoint}", json={"filter": removal}, headers=headers)
        assert changed.status_code == 200 and changed.json["filter"] is None
        assert len(post_event(client, headers, "order.updated", {"amount": 1}).json["deliveries"]) == 1


def test_filter_test_says_whether_it_matches_and_which_condition_failed(client: FlaskClient,
                                                                        headers: dict[str, str]) -> None:
    endpoint = create_endpoint(client, headers, event_types=["order.updated"], filter=PAID_OVER_100)["id"]
    url = f"/v1/endpoints/{endpoint}/filter/test"
    own = client.post(url, json={"event_type": "order.updated", "payload": {"status": "paid", "amount": 50}},
                      headers=headers)
    assert own.status_code == 200
    assert own.json == {"matches": False, "subscribed": True,
                        "failed": 'data.amount: {"$gt": 100} does not hold; the value is 50'}
    other = client.post(url, json={"event_type": "order.created", "payload": {"amount": 50},
                                   "filter": {"data": {"amount": {"$lt": 100}}}}, headers=headers)
    assert other.json == {"matches": True, "subscribed": False, "failed": None}
    bad = client.post(url, json={"event_type": "x", "payload": {}, "filter": {"data": {"a": {"$in": 1}}}},
                      headers=headers)
    assert bad.status_code == 422 and "data.a.$in" in bad.json["errors"]["json"]["filter"]
    assert client.post("/v1/endpoints/ep_nope/filter/test", json={"event_type": "x", "payload": {}},
                       headers=headers).status_code == 404
