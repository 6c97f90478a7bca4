"""Fixtures of the catalog's tests: the headers that write the catalog, and a catalog entry's body."""

from __future__ import annotations

from typing import Any

import pytest

from webhooks.ingest.auth_keys import PLATFORM, create_api_key
from webhooks.storage.db import database, write

#: A payload schema: an order with an amount and a currency.
ORDER_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "amount": {"type": "number", "minimum": 0},
        "currency": {"enum": ["eur", "usd"]},
        "items": {"type": "array", "items": {"type": "object", "required": ["sku"]}},
    },
    "required": ["amount", "currency"],
}

#: An order that validates against ``ORDER_SCHEMA``.
ORDER = {"amount": 150, "currency": "eur", "items": [{"sku": "A-1"}]}


@pytest.fixture
def writer(database_url: str) -> dict[str, str]:
    """The Authorization header that writes the catalog: a platform key's."""
    with database.connection_context(), write():
        _, api_key = create_api_key(PLATFORM, "catalog")
    return {"Authorization": f"Bearer {api_key}"}


def order_type(name: str = "order.paid", **fields: Any) -> dict[str, Any]:
    """The body of ``POST /v1/event-types`` for an order type with ``ORDER_SCHEMA``."""
    return {"name": name, "description": "An order was paid.", "group": "orders", "schema": ORDER_SCHEMA,
            "examples": [ORDER], **fields}
