"""Validation at ingest: an event whose type has a schema is checked before anything is written;
``EVENT_TYPES_STRICT=1`` refuses types that are not in the catalog, or are archived."""

from __future__ import annotations

from typing import Any, Callable

from flask import Flask
from flask.testing import FlaskClient

from tests.api_helpers import create_endpoint, post_event, row_counts
from tests.catalog_helpers import ORDER, order_type
from webhooks.catalog.registry import of_app


def add_order_type(client: FlaskClient, writer: dict[str, str], name: str = "order.paid") -> None:
    assert client.post("/v1/event-types", json=order_type(name), headers=writer).status_code == 201


def test_a_payload_that_breaks_its_schema_is_a_422_naming_each_path_and_rule(
        client: FlaskClient, writer: dict[str, str], headers: dict[str, str]) -> None:
    add_order_type(client, writer)
    create_endpoint(client, headers)
    before = row_counts()
    response = post_event(client, headers, "order.paid", {"amount": -5, "currency": "gbp", "items": [{}]})
    assert response.status_code == 422
    assert response.json["errors"]["json"] == {"payload": {
        "$.amount": ["minimum: -5 is less than the minimum of 0"],
        "$.currency": ['enum: "gbp" is not one of "eur" or "usd"'],
        "$.items[0]": ['required: "sku" is a required property'],
    }}
    assert "schema of event type 'order.paid'" in response.json["message"]
    assert row_counts() == before  # nothing written


def test_a_valid_payload_and_a_type_without_schema_are_accepted(
        client: FlaskClient, writer: dict[str, str], headers: dict[str, str]) -> None:
    add_order_type(client, writer)
    assert post_event(client, headers, "order.paid", ORDER).status_code == 202
    assert post_event(client, headers, "not.in.catalog", {"anything": True}).status_code == 202  # not strict


def test_in_a_batch_each_failing_item_is_named_by_its_index_and_nothing_is_written(
        client: FlaskClient, writer: dict[str, str], headers: dict[str, str]) -> None:
    add_order_type(client, writer)
    create_endpoint(client, headers)
    before = row_counts()
    batch = [{"event_type": "order.paid", "payload": ORDER},
             {"event_type": "order.paid", "payload": {"currency": "eur"}},
             {"event_type": "other", "payload": {}},
             {"event_type": "order.paid", "payload": {**ORDER, "amount": "ten"}}]
    response = client.post("/v1/events/batch", json=batch, headers=headers)
    assert response.status_code == 422
    assert response.json["errors"]["json"] == {
        "1": {"payload": {"$": ['required: "amount" is a required property']}},
        "3": {"payload": {"$.amount": ['type: "ten" is not of type "number"']}},
    }
    assert row_counts() == before


def test_strict_mode_refuses_types_not_in_the_catalog_or_archived(
        make_app: Callable[..., Flask], writer: dict[str, str], headers: dict[str, str]) -> None:
    client = make_app(event_types_strict=True).test_client()
    add_order_type(client, writer)
    assert post_event(client, headers, "order.paid", ORDER).status_code == 202
    unknown = post_event(client, headers, "order.typo", ORDER)
    assert unknown.status_code == 422
    assert unknown.json["errors"]["json"] == {"event_type": [
        "'order.typo' is not in the event-type catalog: only catalog types may be posted (EVENT_TYPES_STRICT=1)"]}
    assert client.delete("/v1/event-types/order.paid", headers=writer).status_code == 204
    archived = client.post("/v1/events/batch", json=[{"event_type": "order.paid", "payload": ORDER}], headers=headers)
    assert archived.status_code == 422
    assert archived.json["errors"]["json"]["0"]["event_type"][0].startswith("'order.paid' is archived")


def test_a_new_schema_applies_to_the_next_event(client: FlaskClient, writer: dict[str, str],
                                                headers: dict[str, str]) -> None:
    add_order_type(client, writer)
    assert post_event(client, headers, "order.paid", {**ORDER, "note": 1}).status_code == 202
    tightened = {"type": "object", "additionalProperties": False,
                 "properties": {"amount": {}, "currency": {}, "items": {}}}
    assert client.patch("/v1/event-types/order.paid", json={"schema": tightened}, headers=writer).status_code == 200
    refused = post_event(client, headers, "order.paid", {**ORDER, "note": 1})
    assert refused.status_code == 422 and "additionalProperties" in str(refused.json["errors"])


def test_validators_are_compiled_once_per_schema_version(app: Flask, client: FlaskClient, writer: dict[str, str],
                                                         headers: dict[str, str]) -> None:
    add_order_type(client, writer)
    post_event(client, headers, "order.paid", ORDER)
    registry = of_app(app)
    first = registry.known()["order.paid"].validator
    client.patch("/v1/event-types/order.paid", json={"description": "no schema change"}, headers=writer)
    post_event(client, headers, "order.paid", ORDER)
    assert registry.known()["order.paid"].validator is first  # read again, not compiled again
    client.patch("/v1/event-types/order.paid", json={"schema": {"type": "object"}}, headers=writer)
    assert registry.known()["order.paid"].validator is not first
