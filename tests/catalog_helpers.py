"""What the catalog's tests share: an order's payload schema, an order that validates against it,
and the body of ``POST /v1/event-types`` for an order type (fixtures stay in ``tests/catalog/conftest.py``)."""

from __future__ import annotations

from typing import Any

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


def order_type(name: str = "order.paid", **fields: Any) -> dict[str, Any]:
    """The body of ``POST /v1/event-types`` for an order type with ``ORDER_SCHEMA``."""
    return {"name": name, "description": "An order was paid.", "group": "orders", "schema": ORDER_SCHEMA,
            "examples": [ORDER], **fields}
