"""/v1/events and /v1/deliveries: accepting events, idempotency, the seq feed, history, resend."""

from __future__ import annotations

from typing import Any, Callable

import pytest
from flask import Flask
from flask.testing import FlaskClient
from prometheus_client import REGISTRY

from tests.conftest import IngestClock
from tests.api_helpers import (
    DEAD_AMQP_URL,
    create_endpoint,
    make_attempt,
    post_event,
    row_counts,
)
from webhooks.storage.size_budget import MAX_ATTEMPT_PAGE_CHARS
from webhooks.storage.models import Delivery, Event, IdempotencyKey

#: The helpers' fixtures (``headers``, ``make_app``); to merge into conftest.py.

DELIVERY_FIELDS = {
    "id", "event_id", "endpoint_id", "status", "attempts", "next_attempt_at",
    "last_status_code", "last_error", "created_at", "delivered_at", "fallback",
}  # fmt: skip
ATTEMPT_FIELDS = {
    "id", "delivery_id", "event_id", "endpoint_id", "attempt_no", "trigger", "started_at", "duration_ms",
    "url", "request_headers", "response_status", "response_headers", "response_body", "error_class",
    "error", "outcome", "next_attempt_at", "fallback",
}  # fmt: skip


# --- accepting an event ------------------------------------------------------------------


def test_event_is_accepted_with_202_and_one_delivery_per_subscribed_endpoint(
    client: FlaskClient, headers: dict[str, str]
) -> None:
    everything = create_endpoint(client, headers)["id"]
    orders = create_endpoint(client, headers, event_types=["order.created"])["id"]
    create_endpoint(client, headers, event_types=["invoice.paid"])

    response = post_event(client, headers, "order.created", {"order": {"id": 7, "lines": [1, 2]}})

    assert response.status_code == 202
    body = response.json
    assert set(body) == {"id", "seq", "event_type", "payload", "created_at", "test", "deliveries"}
    assert body["test"] is False
    assert body["id"].startswith("evt_") and body["seq"] == 1
    assert body["event_type"] == "order.created"
    assert body["payload"] == {"order": {"id": 7, "lines": [1, 2]}}
    assert body["created_at"].endswith("Z")
    assert sorted(d["endpoint_id"] for d in body["deliveries"]) == sorted([everything, orders])
    for delivery in body["deliveries"]:
        assert set(delivery) == {"id", "endpoint_id", "status", "fallback"} and delivery["fallback"] is False
        assert delivery["id"].startswith("dlv_") and delivery["status"] == "pending"
    assert response.headers["Location"].endswith(f"/v1/events/{body['id']}")
    assert "Idempotent-Replayed" not in response.headers


def test_seq_counts_up_per_tenant(client: FlaskClient, headers: dict[str, str]) -> None:
    seqs = [post_event(client, headers).json["seq"] for _ in range(3)]

    assert seqs == [1, 2, 3]


def test_event_is_accepted_while_the_broker_is_down(make_app: Callable[..., Flask], headers: dict[str, str]) -> None:
    client = make_app(amqp_url=DEAD_AMQP_URL).test_client()
    create_endpoint(client, headers)

    response = post_event(client, headers)

    assert response.status_code == 202
    assert Delivery.get_by_id(response.json["deliveries"][0]["id"]).enqueued_at is None  # left to the relay


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({}, {"event_type", "payload"}),
        ({"event_type": "order.created"}, {"payload"}),
        ({"payload": {}}, {"event_type"}),
        ({"event_type": "order.created", "payload": [1, 2]}, {"payload"}),
        ({"event_type": "order.created", "payload": "text"}, {"payload"}),
        ({"event_type": "order.created", "payload": None}, {"payload"}),
        ({"event_type": 5, "payload": {}}, {"event_type"}),
        ({"event_type": "has space", "payload": {}}, {"event_type"}),
        ({"event_type": "", "payload": {}}, {"event_type"}),
        ({"event_type": "x" * 129, "payload": {}}, {"event_type"}),
        ({"event_type": "endpoint.offline", "payload": {}}, {"event_type"}),
        ({"event_type": "delivery.exhausted", "payload": {}}, {"event_type"}),
        ({"event_type": "a", "payload": {}, "idempotency_key": ""}, {"idempotency_key"}),
        ({"event_type": "a", "payload": {}, "idempotency_key": "k" * 256}, {"idempotency_key"}),
        ({"event_type": "a", "payload": {}, "idempotency_key": "a\x00b"}, {"idempotency_key"}),
        ({"event_type": "a", "payload": {}, "idempotency_key": "\udc00"}, {"idempotency_key"}),
        ({"event_type": "a", "payload": {}, "tenant_id": "ten_x", "seq": 9}, {"tenant_id", "seq"}),
    ],
)
def test_invalid_event_is_422_naming_each_bad_field_and_nothing_is_written(
    client: FlaskClient, headers: dict[str, str], body: dict[str, Any], fields: set[str]
) -> None:
    create_endpoint(client, headers)
    before = row_counts()

    response = client.post("/v1/events", json=body, headers=headers)

    assert response.status_code == 422
    assert set(response.json["errors"]["json"]) == fields
    assert row_counts() == before


def test_reserved_event_type_is_rejected_as_reserved(client: FlaskClient, headers: dict[str, str]) -> None:
    response = post_event(client, headers, "endpoint.disabled")

    assert response.status_code == 422
    assert "reserved" in response.json["errors"]["json"]["event_type"][0]
    assert Event.select().count() == 0


# --- idempotency -------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["header", "field"])
def test_same_idempotency_key_returns_the_same_event_and_creates_nothing(
    client: FlaskClient, headers: dict[str, str], where: str
) -> None:
    create_endpoint(client, headers)

    def send() -> Any:
        if where == "header":
            return post_event(client, {**headers, "Idempotency-Key": "order-7"})
        return post_event(client, headers, idempotency_key="order-7")

    first = send()
    before = row_counts()
    again = send()

    assert (first.status_code, again.status_code) == (202, 202)
    assert again.json == first.json
    assert again.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    assert row_counts() == before


def test_idempotency_header_name_is_case_insensitive(client: FlaskClient, headers: dict[str, str]) -> None:
    first = post_event(client, {**headers, "idempotency-key": "k"})
    again = post_event(client, {**headers, "IDEMPOTENCY-KEY": "k"})

    assert again.json["id"] == first.json["id"]
    assert again.headers["Idempotent-Replayed"] == "true"


def test_header_and_field_may_carry_the_same_key(client: FlaskClient, headers: dict[str, str]) -> None:
    response = post_event(client, {**headers, "Idempotency-Key": "k1"}, idempotency_key="k1")

    assert response.status_code == 202
    assert IdempotencyKey.get().key == "k1"


def test_header_and_field_with_different_keys_is_a_409_conflict(client: FlaskClient, headers: dict[str, str]) -> None:
    # Each is valid alone (the document cannot say "equal if both"): together they conflict.
    response = post_event(client, {**headers, "Idempotency-Key": "k1"}, idempotency_key="k2")

    assert response.status_code == 409
    assert "Idempotency-Key header and the body's idempotency_key differ" in response.json["message"]
    assert Event.select().count() == 0


def test_overlong_idempotency_header_is_422_on_the_header(client: FlaskClient, headers: dict[str, str]) -> None:
    response = post_event(client, {**headers, "Idempotency-Key": "k" * 256})

    assert response.status_code == 422
    assert "Idempotency-Key" in response.json["errors"]["headers"]
    assert Event.select().count() == 0


def test_same_key_with_a_different_body_is_409_and_creates_nothing(
    client: FlaskClient, headers: dict[str, str]
) -> None:
    post_event(client, headers, payload={"n": 1}, idempotency_key="k")
    before = row_counts()

    response = post_event(client, headers, payload={"n": 2}, idempotency_key="k")

    assert response.status_code == 409
    assert response.json["code"] == 409 and "idempotency key" in response.json["message"]
    assert row_counts() == before


# --- the feed ----------------------------------------------------------------------------


def test_feed_pages_oldest_first_and_next_cursor_continues(client: FlaskClient, headers: dict[str, str]) -> None:
    ids = [post_event(client, headers, payload={"n": n}).json["id"] for n in range(5)]

    first = client.get("/v1/events?limit=2", headers=headers).json
    second = client.get(f"/v1/events?limit=2&after={first['next_cursor']}", headers=headers).json
    last = client.get(f"/v1/events?limit=2&after={second['next_cursor']}", headers=headers).json

    assert [e["id"] for e in first["data"] + second["data"] + last["data"]] == ids
    assert [e["seq"] for e in first["data"]] == [1, 2]
    assert (first["next_cursor"], first["has_more"]) == (2, True)
    assert (second["next_cursor"], second["has_more"]) == (4, True)
    assert (last["next_cursor"], last["has_more"]) == (5, False)
    assert last["data"][0]["payload"] == {"n": 4}


def test_an_empty_page_still_returns_the_cursor_to_poll_from(client: FlaskClient, headers: dict[str, str]) -> None:
    post_event(client, headers)

    caught_up = client.get("/v1/events?after=1", headers=headers).json
    from_start = client.get("/v1/events", headers=headers).json

    assert caught_up == {"data": [], "next_cursor": 1, "has_more": False}
    assert from_start["next_cursor"] == 1


def test_empty_feed_of_a_new_tenant_has_cursor_zero(client: FlaskClient, headers: dict[str, str]) -> None:
    assert client.get("/v1/events", headers=headers).json == {"data": [], "next_cursor": 0, "has_more": False}


def test_feed_filters_by_event_type_and_keeps_seq_as_the_cursor(client: FlaskClient, headers: dict[str, str]) -> None:
    for event_type in ("a", "b", "a", "b"):
        post_event(client, headers, event_type)

    page = client.get("/v1/events?event_type=b", headers=headers).json

    assert [(e["seq"], e["event_type"]) for e in page["data"]] == [(2, "b"), (4, "b")]
    assert page["next_cursor"] == 4


def test_feed_items_show_their_deliveries(client: FlaskClient, headers: dict[str, str]) -> None:
    endpoint_id = create_endpoint(client, headers)["id"]
    accepted = post_event(client, headers).json

    (item,) = client.get("/v1/events", headers=headers).json["data"]

    (delivery,) = accepted["deliveries"]
    assert item["deliveries"] == [{"id": delivery["id"], "endpoint_id": endpoint_id, "status": "pending", "fallback": False}]


@pytest.mark.parametrize(
    ("query", "field"),
    [("limit=251", "limit"), ("limit=0", "limit"), ("limit=x", "limit"), ("after=-1", "after"),
     ("after=abc", "after"), ("after=9223372036854775808", "after"), ("event_type=bad%20type", "event_type")],
)  # fmt: skip
def test_invalid_feed_arguments_are_422(client: FlaskClient, headers: dict[str, str], query: str, field: str) -> None:
    response = client.get(f"/v1/events?{query}", headers=headers)

    assert response.status_code == 422
    assert list(response.json["errors"]["query"]) == [field]


def test_feed_limit_defaults_to_50_and_allows_250(client: FlaskClient, headers: dict[str, str]) -> None:
    for _ in range(51):
        post_event(client, headers)

    default = client.get("/v1/events", headers=headers).json
    maximum = client.get("/v1/events?limit=250", headers=headers).json

    assert (len(default["data"]), default["has_more"], default["next_cursor"]) == (50, True, 50)
    assert (len(maximum["data"]), maximum["has_more"]) == (51, False)


# --- one event, its deliveries and attempts -----------------------------------------------


def test_event_shows_its_full_deliveries(client: FlaskClient, headers: dict[str, str]) -> None:
    endpoint_id = create_endpoint(client, headers)["id"]
    accepted = post_event(client, headers).json
    delivery_id = accepted["deliveries"][0]["id"]
    Delivery.update(status="retrying", attempts=1, last_status_code=500, last_error="HTTP 500").where(
        Delivery.id == delivery_id
    ).execute()

    response = client.get(f"/v1/events/{accepted['id']}", headers=headers)

    assert response.status_code == 200
    body = response.json
    assert {k: body[k] for k in ("id", "seq", "event_type", "payload")} == {
        k: accepted[k] for k in ("id", "seq", "event_type", "payload")
    }
    (delivery,) = body["deliveries"]
    assert set(delivery) == DELIVERY_FIELDS
    assert (delivery["id"], delivery["event_id"], delivery["endpoint_id"]) == (delivery_id, accepted["id"], endpoint_id)
    assert (delivery["status"], delivery["attempts"], delivery["last_status_code"]) == ("retrying", 1, 500)
    assert delivery["next_attempt_at"].endswith("Z") and delivery["delivered_at"] is None


def test_event_attempts_are_newest_first_and_cursor_paged(client: FlaskClient, headers: dict[str, str]) -> None:
    create_endpoint(client, headers)
    create_endpoint(client, headers)
    event = post_event(client, headers).json
    first, second = (d["id"] for d in event["deliveries"])
    made = [make_attempt(first, 1).id, make_attempt(second, 1).id, make_attempt(first, 2).id]

    page1 = client.get(f"/v1/events/{event['id']}/attempts?limit=2", headers=headers).json
    page2 = client.get(f"/v1/events/{event['id']}/attempts?limit=2&cursor={page1['next_cursor']}", headers=headers).json

    assert [a["id"] for a in page1["data"]] == made[:0:-1]
    assert (page1["has_more"], page1["next_cursor"]) == (True, made[1])
    assert [a["id"] for a in page2["data"]] == [made[0]]
    assert (page2["has_more"], page2["next_cursor"]) == (False, None)
    assert set(page1["data"][0]) == ATTEMPT_FIELDS


def test_delivery_shows_its_twenty_most_recent_attempts(client: FlaskClient, headers: dict[str, str]) -> None:
    create_endpoint(client, headers)
    delivery_id = post_event(client, headers).json["deliveries"][0]["id"]
    made = [make_attempt(delivery_id, n).id for n in range(1, 23)]

    response = client.get(f"/v1/deliveries/{delivery_id}", headers=headers)

    assert response.status_code == 200
    body = response.json
    assert set(body) == DELIVERY_FIELDS | {"recent_attempts"}
    assert [a["id"] for a in body["recent_attempts"]] == made[::-1][:20]
    newest = body["recent_attempts"][0]
    assert (newest["attempt_no"], newest["response_status"], newest["response_body"]) == (22, 500, "boom")
    assert newest["request_headers"] == {"webhook-id": body["event_id"]}
    assert newest["started_at"].endswith("Z")


@pytest.mark.parametrize("cursor", ["nonsense", "%00", "att_" + "!" * 26])
def test_attempt_cursor_must_be_an_id(client: FlaskClient, headers: dict[str, str], cursor: str) -> None:
    create_endpoint(client, headers)
    delivery_id = post_event(client, headers).json["deliveries"][0]["id"]

    response = client.get(f"/v1/deliveries/{delivery_id}/attempts?cursor={cursor}", headers=headers)

    assert response.status_code == 422
    assert list(response.json["errors"]["query"]) == ["cursor"]


def test_delivery_attempts_page_through_everything(client: FlaskClient, headers: dict[str, str]) -> None:
    create_endpoint(client, headers)
    delivery_id = post_event(client, headers).json["deliveries"][0]["id"]
    made = [make_attempt(delivery_id, n).id for n in range(1, 6)]

    seen: list[str] = []
    url = f"/v1/deliveries/{delivery_id}/attempts?limit=2"
    while url:
        page = client.get(url, headers=headers).json
        seen += [a["id"] for a in page["data"]]
        url = page["next_cursor"] and f"/v1/deliveries/{delivery_id}/attempts?limit=2&cursor={page['next_cursor']}"

    assert seen == made[::-1]


def test_a_page_of_attempts_stops_at_its_size_budget_and_goes_on_from_there(
    client: FlaskClient, headers: dict[str, str]
) -> None:
    create_endpoint(client, headers)
    delivery_id = post_event(client, headers).json["deliveries"][0]["id"]
    # Stored before headers were capped: 961 KB of headers each.
    huge = {f"x-big-{n}": "v" * 8000 for n in range(120)}
    made = [make_attempt(delivery_id, n, response_headers=huge).id for n in range(1, 8)]

    url = f"/v1/deliveries/{delivery_id}/attempts?limit=250"
    pages: list[list[str]] = []
    while url:
        response = client.get(url, headers=headers)
        assert len(response.data) < 2 * MAX_ATTEMPT_PAGE_CHARS
        page = response.json
        pages.append([a["id"] for a in page["data"]])
        url = page["next_cursor"] and f"/v1/deliveries/{delivery_id}/attempts?limit=250&cursor={page['next_cursor']}"

    assert [len(ids) for ids in pages] == [4, 3]  # 4 x 961 KB fit in 4 MB, 5 would not
    assert sum(pages, []) == made[::-1]


def test_one_attempt_larger_than_the_budget_still_makes_a_page(client: FlaskClient, headers: dict[str, str]) -> None:
    create_endpoint(client, headers)
    delivery_id = post_event(client, headers).json["deliveries"][0]["id"]
    made = [make_attempt(delivery_id, n, response_body="b" * (MAX_ATTEMPT_PAGE_CHARS + 1)).id for n in (1, 2)]

    page = client.get(f"/v1/deliveries/{delivery_id}/attempts", headers=headers).json

    assert ([a["id"] for a in page["data"]], page["has_more"], page["next_cursor"]) == ([made[1]], True, made[1])


# --- resend ------------------------------------------------------------------------------


def test_resend_queues_a_fresh_attempt_and_answers_202_with_the_delivery(
    client: FlaskClient, headers: dict[str, str]
) -> None:
    create_endpoint(client, headers)
    delivery_id = post_event(client, headers).json["deliveries"][0]["id"]
    Delivery.update(status="failed", attempts=10, next_attempt_at=None).where(Delivery.id == delivery_id).execute()

    response = client.post(f"/v1/deliveries/{delivery_id}/resend", headers=headers)

    assert response.status_code == 202
    assert set(response.json) == DELIVERY_FIELDS
    assert response.json["id"] == delivery_id
    assert response.json["next_attempt_at"] is not None


def test_resending_a_cancelled_delivery_is_409_with_the_reason(client: FlaskClient, headers: dict[str, str]) -> None:
    endpoint_id = create_endpoint(client, headers)["id"]
    delivery_id = post_event(client, headers).json["deliveries"][0]["id"]
    client.delete(f"/v1/endpoints/{endpoint_id}", headers=headers)

    response = client.post(f"/v1/deliveries/{delivery_id}/resend", headers=headers)

    assert response.status_code == 409
    assert "cancelled" in response.json["message"]
    assert client.get(f"/v1/deliveries/{delivery_id}", headers=headers).json["status"] == "cancelled"


def test_resend_while_the_broker_is_down_is_503_with_retry_after_and_changes_nothing(
    make_app: Callable[..., Flask], headers: dict[str, str]
) -> None:
    client = make_app(amqp_url=DEAD_AMQP_URL).test_client()
    create_endpoint(client, headers)
    delivery_id = post_event(client, headers).json["deliveries"][0]["id"]
    Delivery.update(status="failed", next_attempt_at=None).where(Delivery.id == delivery_id).execute()
    before = Delivery.get_by_id(delivery_id).__data__

    response = client.post(f"/v1/deliveries/{delivery_id}/resend", headers=headers)

    assert response.status_code == 503
    assert response.headers["Retry-After"] == "5"
    assert response.json["code"] == 503 and "broker" in response.json["message"]
    assert Delivery.get_by_id(delivery_id).__data__ == before


def test_recover_while_the_broker_is_down_is_503(make_app: Callable[..., Flask], headers: dict[str, str]) -> None:
    client = make_app(amqp_url=DEAD_AMQP_URL).test_client()
    endpoint_id = create_endpoint(client, headers)["id"]
    delivery_id = post_event(client, headers).json["deliveries"][0]["id"]
    Delivery.update(status="failed").where(Delivery.id == delivery_id).execute()

    response = client.post(
        f"/v1/endpoints/{endpoint_id}/recover", json={"since": "2000-01-01T00:00:00Z"}, headers=headers
    )

    assert response.status_code == 503
    assert response.headers["Retry-After"] == "5"


def rate_refusals() -> float:
    return REGISTRY.get_sample_value("webhooks_api_refused_total", {"limit": "ingest_rate"}) or 0.0


def test_ingestion_over_the_tenant_rate_limit_gets_429_with_retry_after_and_writes_nothing(
    make_app: Callable[..., Flask], headers: dict[str, str], ingest_clock: IngestClock
) -> None:
    client = make_app(ingest_rate_limit=3.0).test_client()
    counted_before = rate_refusals()
    answers = [post_event(client, headers).status_code for _ in range(5)]
    assert answers == [202, 202, 202, 429, 429]
    refused = post_event(client, headers)
    assert refused.status_code == 429
    assert int(refused.headers["Retry-After"]) >= 1
    assert "rate limit" in refused.json["message"]
    assert Event.select().count() == 3
    assert rate_refusals() == counted_before + 3  # once per 429, though the shortcut met each first
    ingest_clock.advance(0.4)  # a token comes back after 1/3 s
    assert post_event(client, headers).status_code == 202
