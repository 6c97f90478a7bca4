"""What the catalog's tests share: an order's payload schema, an order that validates against it,
the body of ``POST /v1/event-types`` for an order type, a schema with nested fields, a filter as the
portal's forms take it, and a small catalog of every kind of entry (fixtures stay in ``tests/catalog/conftest.py``)."""

from __future__ import annotations

from typing import Any

from webhooks.catalog import store

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


#: A customer with nested fields: a nested object and an array of objects.
CUSTOMER_SCHEMA = {
    "type": "object", "required": ["customer"],
    "properties": {
        "customer": {"type": "object", "description": "Who signed up.", "required": ["id"],
                     "properties": {"id": {"type": "string", "pattern": "^cus_"},
                                    "address": {"type": "object", "properties": {"city": {"type": "string"}}}}},
        "tags": {"type": "array", "items": {"type": "object", "properties": {"label": {"type": "string"}}}},
    },
}
CUSTOMER = {"customer": {"id": "cus_1", "address": {"city": "Lyon"}}, "tags": [{"label": "vip"}]}

#: A filter as typed in the portal's forms: paid orders of at least 100, in euros.
PAID_OVER_100 = '{"data": {"currency": "eur", "amount": {"$gte": 100}}}'


def order_type(name: str = "order.paid", **fields: Any) -> dict[str, Any]:
    """The body of ``POST /v1/event-types`` for an order type with ``ORDER_SCHEMA``."""
    return {"name": name, "description": "An order was paid.", "group": "orders", "schema": ORDER_SCHEMA,
            "examples": [ORDER], **fields}


def sample_catalog() -> None:
    """A catalog of every kind of entry: two groups (one type deprecated, one archived), nested fields,
    a type with no group, schema or example (and the built-in operational types)."""
    store.create(order_type())
    store.create(order_type("order.legacy", description="The old order event.", deprecated=True))
    store.create({"name": "customer.created", "description": "A customer signed up.", "group": "customers",
                  "schema": CUSTOMER_SCHEMA, "examples": [CUSTOMER]})
    store.create({"name": "ping", "description": "No group, no schema."})
    store.create(order_type("order.gone", description="Archived."))
    store.archive("order.gone")
