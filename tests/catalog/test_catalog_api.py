"""/v1/event-types: the catalog written, read, paged, archived; schemas and examples checked when written."""

from __future__ import annotations

from typing import Any

from flask.testing import FlaskClient

from tests.catalog_helpers import ORDER, ORDER_SCHEMA, order_type
from webhooks.event_types import OPERATIONAL_EVENT_TYPES


def create(client: FlaskClient, writer: dict[str, str], **fields: Any) -> dict[str, Any]:
    response = client.post("/v1/event-types", json=order_type(**fields), headers=writer)
    assert response.status_code == 201, response.json
    return response.json


def test_an_event_type_is_created_and_read_back_with_its_schema_and_examples(
        client: FlaskClient, writer: dict[str, str], headers: dict[str, str]) -> None:
    created = create(client, writer)
    assert created["version"] == 1 and created["archived"] is False and created["operational"] is False
    shown = client.get("/v1/event-types/order.paid", headers=headers).json
    assert shown["schema"] == ORDER_SCHEMA and shown["examples"] == [ORDER] and shown["group"] == "orders"


def test_an_invalid_schema_is_a_422_that_says_why(client: FlaskClient, writer: dict[str, str]) -> None:
    response = client.post("/v1/event-types", json=order_type(schema={"type": "objekt"}), headers=writer)
    assert response.status_code == 422
    assert response.json["errors"]["json"]["schema"] == [
        "not a valid draft 2020-12 schema at $.type: \"objekt\" is not valid under any of the schemas listed in the "
        "'anyOf' keyword"]
    remote = client.post("/v1/event-types", json=order_type(schema={"$ref": "https://example.com/s.json"}),
                         headers=writer)
    assert remote.status_code == 422 and "remote references are not fetched" in remote.json["errors"]["json"]["schema"][0]
    other_draft = client.post("/v1/event-types", json=order_type(
        schema={"$schema": "http://json-schema.org/draft-07/schema#"}), headers=writer)
    assert other_draft.status_code == 422 and "draft 2020-12" in other_draft.json["errors"]["json"]["schema"][0]


def test_each_example_must_validate_against_the_schema(client: FlaskClient, writer: dict[str, str]) -> None:
    response = client.post("/v1/event-types", json=order_type(examples=[ORDER, {"amount": -1, "currency": "eur"}]),
                           headers=writer)
    assert response.status_code == 422
    assert response.json["errors"]["json"]["examples"] == {"1": {"$.amount": ["minimum: -1 is less than the minimum of 0"]}}
    assert client.get("/v1/event-types/order.paid", headers=writer).status_code == 404  # nothing written


def test_a_name_taken_is_a_409_and_operational_types_are_built_in(client: FlaskClient, writer: dict[str, str]) -> None:
    create(client, writer)
    assert client.post("/v1/event-types", json=order_type(), headers=writer).status_code == 409
    assert client.post("/v1/event-types", json=order_type(name="endpoint.offline"), headers=writer).status_code == 409
    assert client.patch("/v1/event-types/endpoint.offline", json={"description": "x"}, headers=writer).status_code == 409
    assert client.delete("/v1/event-types/endpoint.offline", headers=writer).status_code == 409


def test_patch_changes_an_entry_and_a_new_schema_is_a_new_version(client: FlaskClient, writer: dict[str, str]) -> None:
    create(client, writer)
    described = client.patch("/v1/event-types/order.paid", json={"description": "Paid.", "deprecated": True},
                             headers=writer).json
    assert described["description"] == "Paid." and described["deprecated"] is True and described["version"] == 1
    loosened = client.patch("/v1/event-types/order.paid", json={"schema": {"type": "object"}}, headers=writer).json
    assert loosened["version"] == 2
    # The examples must fit the schema the entry will have.
    refused = client.patch("/v1/event-types/order.paid", json={"schema": {"type": "object", "required": ["x"]}},
                           headers=writer)
    assert refused.status_code == 422 and "0" in refused.json["errors"]["json"]["examples"]
    assert client.patch("/v1/event-types/nope", json={"description": "x"}, headers=writer).status_code == 404


def test_delete_archives_a_type_which_patch_restores(client: FlaskClient, writer: dict[str, str],
                                                     headers: dict[str, str]) -> None:
    create(client, writer)
    assert client.delete("/v1/event-types/order.paid", headers=writer).status_code == 204
    assert client.get("/v1/event-types/order.paid", headers=headers).json["archived"] is True
    names = [t["name"] for t in client.get("/v1/event-types", headers=headers).json["data"]]
    assert "order.paid" not in names
    archived = client.get("/v1/event-types?include_archived=true", headers=headers).json["data"]
    assert "order.paid" in [t["name"] for t in archived]
    restored = client.patch("/v1/event-types/order.paid", json={"archived": False}, headers=writer).json
    assert restored["archived"] is False


def test_the_list_is_paged_by_name_filtered_by_group_with_the_operational_types(
        client: FlaskClient, writer: dict[str, str], headers: dict[str, str]) -> None:
    for name in ("a.one", "b.two", "z.three"):
        create(client, writer, name=name)
    seen, cursor = [], None
    while True:
        page = client.get("/v1/event-types?limit=2" + (f"&cursor={cursor}" if cursor else ""), headers=headers).json
        seen += [t["name"] for t in page["data"]]
        if not page["has_more"]:
            assert page["next_cursor"] is None
            break
        cursor = page["next_cursor"]
    assert seen == sorted(["a.one", "b.two", "z.three", *OPERATIONAL_EVENT_TYPES])
    orders = client.get("/v1/event-types?group=orders", headers=headers).json["data"]
    assert [t["name"] for t in orders] == ["a.one", "b.two", "z.three"]
    operational = client.get("/v1/event-types?group=operational", headers=headers).json["data"]
    assert {t["name"] for t in operational} == OPERATIONAL_EVENT_TYPES
    assert all(t["schema"] and t["examples"] and t["operational"] for t in operational)


def test_the_catalog_as_one_json_schema_document(client: FlaskClient, writer: dict[str, str],
                                                 headers: dict[str, str]) -> None:
    create(client, writer)
    document = client.get("/v1/event-types.schema.json", headers=headers).json
    assert document["$defs"]["order.paid"]["$id"] == "urn:webhooks:event-type:order.paid"
    assert "order.paid" in [variant["properties"]["type"]["const"] for variant in document["oneOf"]]
    import jsonschema_rs
    validator = jsonschema_rs.Draft202012Validator(document)
    assert validator.is_valid({"type": "order.paid", "timestamp": "2026-11-26T12:00:00Z", "data": ORDER})
    assert not validator.is_valid({"type": "order.paid", "timestamp": "2026-11-26T12:00:00Z", "data": {"amount": 1}})


def test_the_catalog_needs_a_key(client: FlaskClient) -> None:
    assert client.get("/v1/event-types").status_code == 401
    assert client.post("/v1/event-types", json=order_type()).status_code == 401


def test_any_key_reads_the_catalog_and_only_a_platform_key_writes_it(
        client: FlaskClient, writer: dict[str, str], headers: dict[str, str]) -> None:
    create(client, writer)
    for key in (headers, writer):
        assert client.get("/v1/event-types/order.paid", headers=key).status_code == 200
        assert client.get("/v1/event-types.schema.json", headers=key).status_code == 200
    refused = client.post("/v1/event-types", json=order_type("other"), headers=headers)
    assert refused.status_code == 403 and "platform API key" in refused.json["message"]
    assert client.patch("/v1/event-types/order.paid", json={"description": "x"}, headers=headers).status_code == 403
    assert client.delete("/v1/event-types/order.paid", headers=headers).status_code == 403
    assert client.get("/v1/event-types/order.paid", headers=headers).json["description"] == "An order was paid."
