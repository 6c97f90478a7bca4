"""``POST /v1/events/batch``: all or nothing, list order, per-item idempotency, and its errors."""

from __future__ import annotations

import json

from types import SimpleNamespace
from typing import Any, Callable

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.api_helpers import create_endpoint, post_event, row_counts
from tests.conftest import IngestClock, queue_messages, wait_until
from webhooks.config import Settings
from webhooks.ingest.accept import MAX_BATCH
from webhooks.messaging.messages import DeliveryMessage
from webhooks.storage.payload_json import payload_json
from webhooks.storage.models import Delivery, Event
from webhooks.api.schemas import BatchEventSchema


def item(n: int = 0, event_type: str = "order.created", **fields: Any) -> dict[str, Any]:
    return {"event_type": event_type, "payload": {"n": n}, **fields}


def post_batch(client: FlaskClient, headers: dict[str, str], items: Any) -> Any:
    return client.post("/v1/events/batch", json=items, headers=headers)


# --- accepting ---------------------------------------------------------------------------------


def test_a_batch_is_stored_in_list_order_with_consecutive_seqs_and_answered_in_request_order(
    client: FlaskClient, headers: dict[str, str]
) -> None:
    endpoint_id = create_endpoint(client, headers)["id"]
    post_event(client, headers)  # seq 1

    response = post_batch(client, headers, [item(n, f"type.{n}") for n in range(5)])

    assert response.status_code == 202
    data = response.json["data"]
    assert [e["event_type"] for e in data] == [f"type.{n}" for n in range(5)]
    assert [e["seq"] for e in data] == [2, 3, 4, 5, 6]
    assert all(e["replayed"] is False for e in data)
    for event in data:
        assert set(event) == {"id", "seq", "event_type", "created_at", "deliveries", "replayed"}  # no payload
        (delivery,) = event["deliveries"]
        assert (delivery["endpoint_id"], delivery["status"]) == (endpoint_id, "pending")
        assert Delivery.get_by_id(delivery["id"]).event_id == event["id"]
    stored = [(e.seq, e.payload) for e in Event.select().order_by(Event.seq)]
    assert stored == [(1, {"order": 1})] + [(n + 2, {"n": n}) for n in range(5)]


def test_batch_events_are_published_like_single_events(
    client: FlaskClient, headers: dict[str, str], app: Flask, settings: Settings
) -> None:
    create_endpoint(client, headers)

    data = post_batch(client, headers, [item(n) for n in range(3)]).json["data"]

    app.extensions["webhooks.enqueuer"].wait_idle()
    ids = {e["deliveries"][0]["id"] for e in data}
    wait_until(lambda: all(d.enqueued_at for d in Delivery.select()))
    queued = [DeliveryMessage.decode(body, headers) for body, headers in queue_messages(settings.topology.primary)]
    ours = [m for m in queued if m.delivery_id in ids]  # an earlier test's enqueuer may still publish into the queue
    assert {m.delivery_id for m in ours} == ids
    assert {m.event_id: json.loads(payload_json(m.payload)) for m in ours} == {e["id"]: {"n": n} for n, e in enumerate(data)}


def test_batch_events_reach_the_feed_like_any_others(client: FlaskClient, headers: dict[str, str]) -> None:
    post_event(client, headers, payload={"single": 1})
    batch = post_batch(client, headers, [item(n) for n in range(3)]).json["data"]
    post_event(client, headers, payload={"single": 2})

    feed = client.get("/v1/events?after=1", headers=headers).json

    assert [e["id"] for e in feed["data"][:3]] == [e["id"] for e in batch]
    assert [e["seq"] for e in feed["data"]] == [2, 3, 4, 5]
    assert feed["next_cursor"] == 5


# --- all or nothing ------------------------------------------------------------------------------


def test_bad_items_are_422_naming_each_index_and_field_and_nothing_is_written(
    client: FlaskClient, headers: dict[str, str]
) -> None:
    create_endpoint(client, headers)
    before = row_counts()
    items = [item(0), {"event_type": "has space", "payload": {}}, item(2), {"payload": []}, item(4, extra=1)]

    response = post_batch(client, headers, items)

    assert response.status_code == 422
    assert response.json["errors"]["json"] == {
        "1": {"event_type": ["must be 1 to 128 letters, digits, '_', '.' or '-'"]},
        "3": {"event_type": ["Missing data for required field."], "payload": ["Not a valid mapping type."]},
        "4": {"extra": ["Unknown field."]},
    }
    assert row_counts() == before


def test_a_reserved_event_type_in_a_batch_is_422_on_its_index(client: FlaskClient, headers: dict[str, str]) -> None:
    response = post_batch(client, headers, [item(0), item(1, "endpoint.offline")])

    assert response.status_code == 422
    assert list(response.json["errors"]["json"]) == ["1"]
    assert "reserved" in response.json["errors"]["json"]["1"]["event_type"][0]
    assert Event.select().count() == 0


@pytest.mark.parametrize("body", [[], [item(n) for n in range(MAX_BATCH + 1)]], ids=["empty", "501"])
def test_a_batch_of_none_or_more_than_500_events_is_422(
    make_app: Callable[..., Flask], headers: dict[str, str], body: list[Any]
) -> None:
    client = make_app(max_body_bytes=1_000_000).test_client()

    response = post_batch(client, headers, body)

    assert response.status_code == 422
    assert "1 to 500 events" in response.json["errors"]["json"]["_schema"][0]
    assert Event.select().count() == 0


def test_500_events_are_one_batch(make_app: Callable[..., Flask], headers: dict[str, str]) -> None:
    client = make_app(max_body_bytes=1_000_000).test_client()
    create_endpoint(client, headers)
    create_endpoint(client, headers)

    response = post_batch(client, headers, [item(n) for n in range(MAX_BATCH)])

    assert response.status_code == 202
    assert [e["seq"] for e in response.json["data"]] == list(range(1, MAX_BATCH + 1))
    assert (Event.select().count(), Delivery.select().count()) == (MAX_BATCH, 2 * MAX_BATCH)
    client.application.extensions["webhooks.enqueuer"].wait_idle()  # not into the next test's queue


@pytest.mark.parametrize("body", [{"event_type": "a", "payload": {}}, "text", [1, 2]])
def test_a_body_that_is_not_a_list_of_objects_is_422(client: FlaskClient, headers: dict[str, str], body: Any) -> None:
    response = post_batch(client, headers, body)

    assert response.status_code == 422
    assert "json" in response.json["errors"]
    assert Event.select().count() == 0


def test_a_body_over_the_size_limit_is_413_and_nothing_is_written(
    make_app: Callable[..., Flask], headers: dict[str, str]
) -> None:
    client = make_app(max_body_bytes=4096).test_client()

    response = post_batch(client, headers, [item(n, payload_text="x" * 100) for n in range(40)])

    assert response.status_code == 413
    assert "at most 4096 bytes" in response.json["message"]
    assert Event.select().count() == 0


def test_an_idempotency_key_header_on_a_batch_is_422(client: FlaskClient, headers: dict[str, str]) -> None:
    response = post_batch(client, {**headers, "Idempotency-Key": "k"}, [item(0)])

    assert response.status_code == 422
    assert list(response.json["errors"]["headers"]) == ["Idempotency-Key"]
    assert Event.select().count() == 0


# --- idempotency per item --------------------------------------------------------------------------


def test_items_whose_key_was_seen_return_their_earlier_event_marked_replayed(
    client: FlaskClient, headers: dict[str, str]
) -> None:
    create_endpoint(client, headers)
    single = post_event(client, headers, payload={"n": 1}, idempotency_key="k1").json
    first = post_batch(client, headers, [item(2, idempotency_key="k2"), item(3)]).json["data"]
    before = row_counts()

    again = post_batch(client, headers, [item(9), item(1, idempotency_key="k1"), item(2, idempotency_key="k2")])

    assert again.status_code == 202
    new, replay1, replay2 = again.json["data"]
    assert (new["replayed"], replay1["replayed"], replay2["replayed"]) == (False, True, True)
    assert {k: v for k, v in replay1.items() if k != "replayed"} == {k: v for k, v in single.items()
                                                                     if k not in ("payload", "test")}
    assert {**replay2, "replayed": False} == first[0]
    assert new["seq"] == 4  # replays spend no seq
    assert row_counts() == {**before, "Event": before["Event"] + 1, "Delivery": before["Delivery"] + 1}


def test_a_key_repeated_within_a_batch_names_one_event(client: FlaskClient, headers: dict[str, str]) -> None:
    items = [item(1, idempotency_key="k"), item(2), item(1, idempotency_key="k")]

    data = post_batch(client, headers, items).json["data"]

    assert data[2]["id"] == data[0]["id"] and (data[0]["replayed"], data[2]["replayed"]) == (False, True)
    assert [e["seq"] for e in data] == [1, 2, 1]
    assert Event.select().count() == 2


def test_a_seen_key_with_a_different_body_is_409_naming_the_index_and_nothing_is_written(
    client: FlaskClient, headers: dict[str, str]
) -> None:
    post_event(client, headers, payload={"n": 1}, idempotency_key="k1")
    before = row_counts()

    response = post_batch(client, headers, [item(0), item(5, idempotency_key="k0"), item(2, idempotency_key="k1")])

    assert response.status_code == 409
    assert response.json["message"] == "item 2: idempotency key 'k1' was already used with a different request"
    assert response.json["errors"]["json"] == {"2": {"idempotency_key": ["already used with a different request"]}}
    assert row_counts() == before


def test_a_key_repeated_within_a_batch_with_a_different_body_is_409(
    client: FlaskClient, headers: dict[str, str]
) -> None:
    response = post_batch(client, headers, [item(1, idempotency_key="k"), item(2, idempotency_key="k")])

    assert response.status_code == 409
    assert list(response.json["errors"]["json"]) == ["1"]
    assert Event.select().count() == 0


# --- tenants and limits ---------------------------------------------------------------------------


def test_a_batch_is_stored_for_the_caller_only_and_keys_are_per_tenant(
    client: FlaskClient, headers: dict[str, str], other_tenant: SimpleNamespace,
    auth: Callable[[SimpleNamespace], dict[str, str]],
) -> None:
    mine = create_endpoint(client, headers)["id"]
    theirs = create_endpoint(client, auth(other_tenant))["id"]
    post_batch(client, auth(other_tenant), [item(1, idempotency_key="shared")])

    data = post_batch(client, headers, [item(1, idempotency_key="shared"), item(2)]).json["data"]

    assert [(e["seq"], e["replayed"]) for e in data] == [(1, False), (2, False)]
    assert {d["endpoint_id"] for e in data for d in e["deliveries"]} == {mine} != {theirs}
    assert client.get(f"/v1/events/{data[0]['id']}", headers=auth(other_tenant)).status_code == 404
    assert len(client.get("/v1/events", headers=auth(other_tenant)).json["data"]) == 1


def test_the_rate_limit_counts_the_events_of_a_batch(
    make_app: Callable[..., Flask], headers: dict[str, str], ingest_clock: IngestClock
) -> None:
    client = make_app(ingest_rate_limit=10.0).test_client()

    assert post_batch(client, headers, [item(n) for n in range(7)]).status_code == 202
    refused = post_batch(client, headers, [item(n) for n in range(4)])  # 3 tokens left

    assert refused.status_code == 429
    assert int(refused.headers["Retry-After"]) >= 1
    assert post_batch(client, headers, [item(n) for n in range(3)]).status_code == 202
    assert post_event(client, headers).status_code == 429
    assert Event.select().count() == 10


def test_a_batch_larger_than_the_rate_limit_can_ever_allow_is_422(
    make_app: Callable[..., Flask], headers: dict[str, str]
) -> None:
    client = make_app(ingest_rate_limit=5.0).test_client()

    response = post_batch(client, headers, [item(n) for n in range(6)])

    assert response.status_code == 422
    assert "send smaller batches" in response.json["errors"]["json"]["_schema"][0]
    assert Event.select().count() == 0


def test_the_answer_is_what_the_documented_schema_would_dump(client: FlaskClient, headers: dict[str, str]) -> None:
    create_endpoint(client, headers)
    data = post_batch(client, headers, [item(1, idempotency_key="k"), item(2)]).json["data"]
    replayed = post_batch(client, headers, [item(1, idempotency_key="k")]).json["data"]

    for answer in (data[0], data[1], replayed[0]):
        event = Event.get_by_id(answer["id"])
        event.deliveries = list(Delivery.select().where(Delivery.event == event.id).order_by(Delivery.id))
        event.replayed = answer is replayed[0]
        assert answer == BatchEventSchema().dump(event)


def test_the_openapi_document_describes_the_batch(client: FlaskClient) -> None:
    spec = client.get("/openapi.json").json
    operation = spec["paths"]["/v1/events/batch"]["post"]

    body = operation["requestBody"]["content"]["application/json"]["schema"]
    assert body["type"] == "array" and (body["minItems"], body["maxItems"]) == (1, MAX_BATCH)
    assert body["items"] == {"$ref": "#/components/schemas/EventCreate"}
    assert {"202", "409", "413", "422", "429"} <= set(operation["responses"])
    answer = spec["components"]["schemas"]["EventBatch"]["properties"]["data"]
    assert answer["items"] == {"$ref": "#/components/schemas/BatchEvent"}
    assert "replayed" in spec["components"]["schemas"]["BatchEvent"]["properties"]


def test_the_default_rate_limit_lets_a_tenant_send_full_batches_at_the_batch_ingestion_rate() -> None:
    default = Settings.from_env(env={}).ingest_rate_limit

    assert default >= 20_000  # the batch ingestion the web tier is built for
    assert default >= MAX_BATCH  # a full batch always fits in the bucket (one second's worth)
