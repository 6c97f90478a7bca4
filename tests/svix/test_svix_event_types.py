"""The Svix API's event types are our catalog: the SDK creates, lists, reads, patches and archives them,
and a message is checked against the payload schema it gives (``schemas["1"]``)."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient
from svix.api import ApplicationIn, EventTypeIn, EventTypePatch, MessageIn, Svix
from svix.api.errors.http_error import HttpError

SCHEMA = {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]}


def test_an_event_type_is_a_catalog_entry(svix_client: Svix, client: FlaskClient, platform: dict[str, str]) -> None:
    created = svix_client.event_type.create(EventTypeIn(name="order.paid", description="Paid",
                                                        schemas={"1": SCHEMA}, group_name="orders"))

    assert created.name == "order.paid" and created.schemas == {"1": SCHEMA} and created.group_name == "orders"
    ours = client.get("/v1/event-types/order.paid", headers=platform).json
    assert ours["schema"] == SCHEMA and ours["group"] == "orders"
    assert "order.paid" in [entry.name for entry in svix_client.event_type.list().data]
    assert svix_client.event_type.patch("order.paid", EventTypePatch(deprecated=True)).deprecated


def test_a_message_must_match_its_types_schema(svix_client: Svix) -> None:
    svix_client.event_type.create(EventTypeIn(name="order.paid", description="Paid", schemas={"1": SCHEMA}))
    app = svix_client.application.create(ApplicationIn(name="Acme"))

    with pytest.raises(Exception) as refused:
        svix_client.message.create(app.id, MessageIn(event_type="order.paid", payload={"amount": "five"}))
    assert getattr(refused.value, "status_code", None) == 422


def test_a_deleted_event_type_is_archived(svix_client: Svix) -> None:
    svix_client.event_type.create(EventTypeIn(name="order.paid", description="Paid"))
    svix_client.event_type.delete("order.paid")

    assert svix_client.event_type.get("order.paid").archived
    with pytest.raises(HttpError) as taken:
        svix_client.event_type.create(EventTypeIn(name="order.paid", description="Again"))
    assert taken.value.status_code == 409
