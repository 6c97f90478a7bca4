"""The console's catalog page: each type under its group, with its description, its payload's fields
(nested ones indented), schema and examples."""

from __future__ import annotations

from types import SimpleNamespace

from flask.testing import FlaskClient

from tests.api_helpers import create_endpoint
from tests.catalog_helpers import ORDER_SCHEMA, order_type
from tests.console_helpers import log_in
from webhooks.catalog import store
from webhooks.catalog.reading import UNGROUPED, FieldRow, by_group, field_rows


def test_a_schema_reads_as_one_row_per_field() -> None:
    assert field_rows(ORDER_SCHEMA) == [
        FieldRow("amount", "number", True, "minimum 0", ""),
        FieldRow("currency", "one of", True, 'enum ["eur", "usd"]', ""),
        FieldRow("items", "array of object", False, "", ""),
    ]
    nested = {"type": "object", "required": ["customer"], "properties": {
        "customer": {"type": "object", "description": "Who paid.", "required": ["id"],
                     "properties": {"id": {"type": "string", "pattern": "^cus_"}}},
        "lines": {"type": "array", "items": {"type": "object", "properties": {"qty": {"type": ["integer", "null"]}}}},
    }}
    assert field_rows(nested) == [
        FieldRow("customer", "object", True, "", "Who paid."),
        FieldRow("customer.id", "string", True, 'pattern "^cus_"', ""),
        FieldRow("lines", "array of object", False, "", ""),
        FieldRow("lines[].qty", "integer or null", False, "", ""),
    ]


def test_a_field_knows_its_depth_and_name_and_entries_go_under_their_groups() -> None:
    rows = field_rows({"properties": {"customer": {"properties": {"address": {"properties": {"city": {}}}}},
                                      "lines": {"items": {"properties": {"qty": {}}}}}})
    assert [(row.path, row.depth, row.name) for row in rows] == [
        ("customer", 0, "customer"), ("customer.address", 1, "address"), ("customer.address.city", 2, "city"),
        ("lines", 0, "lines"), ("lines[].qty", 1, "qty"),
    ]
    entries = [SimpleNamespace(name=name, group=group) for name, group in
               (("a", "orders"), ("b", None), ("c", "customers"), ("d", "orders"))]
    assert [(group, [e.name for e in members]) for group, members in by_group(entries)] == [
        ("customers", ["c"]), ("orders", ["a", "d"]), (UNGROUPED, ["b"])]


def test_the_console_lists_the_catalog_with_fields_and_examples(client: FlaskClient) -> None:
    store.create(order_type(description="An order was paid."))
    store.create(order_type("order.old", description="Old.", deprecated=True))
    store.archive("order.old")
    log_in(client, "viewer")
    page = client.get("/console/event-types").get_data(as_text=True)
    assert "order.paid" in page and "An order was paid." in page
    assert '<code title="amount">amount</code>' in page and "minimum 0" in page  # the schema, readably
    assert page.index(">operational <span") < page.index(">orders <span")  # under their groups, by name
    assert "&#34;currency&#34;: &#34;eur&#34;" in page  # the example, escaped
    assert "endpoint.offline" in page  # the operational types
    assert "order.old" not in page
    archived = client.get("/console/event-types?include_archived=true&group=orders").get_data(as_text=True)
    assert "order.old" in archived and "endpoint.offline" not in archived


def test_the_console_shows_an_endpoints_filter(client: FlaskClient, headers: dict[str, str]) -> None:
    endpoint = create_endpoint(client, headers, filter={"data": {"currency": "eur"}})
    log_in(client, "viewer")
    page = client.get(f"/console/endpoints/{endpoint['id']}").get_data(as_text=True)
    assert "only events matching its filter" in page and "&#34;currency&#34;: &#34;eur&#34;" in page
