"""The catalog as one JSON Schema document (``GET /v1/event-types.schema.json``), for code generators.

Each payload schema is an embedded resource under ``$defs`` with an ``$id`` of its own, so
its internal ``$ref``s (``#/$defs/…``) still resolve inside it; the webhook body a receiver
gets (``type``, ``timestamp``, ``data``) is a ``oneOf`` keyed by ``type``.
"""

from __future__ import annotations

from typing import Any, Iterable, Protocol

from webhooks.catalog.schemas import DIALECT

#: The ``$id`` prefix of each embedded payload schema.
ID_PREFIX = "urn:webhooks:event-type:"


class HasSchema(Protocol):
    name: str
    description: str
    schema: dict[str, Any] | None


def catalog_document(entries: Iterable[HasSchema]) -> dict[str, Any]:
    """The document of the ``entries`` that have a schema, by name."""
    described = sorted((entry for entry in entries if entry.schema is not None), key=lambda entry: entry.name)
    return {
        "$schema": DIALECT,
        "title": "Webhook events",
        "description": "The body of each webhook request, by event type; each payload schema under $defs.",
        "$defs": {entry.name: {**(entry.schema or {}), "$id": f"{ID_PREFIX}{entry.name}",
                               "description": entry.schema.get("description", entry.description)
                               if entry.schema else entry.description}
                  for entry in described},
        "oneOf": [
            {
                "type": "object",
                "properties": {
                    "type": {"const": entry.name},
                    "timestamp": {"type": "string", "format": "date-time"},
                    "data": {"$ref": f"{ID_PREFIX}{entry.name}"},
                },
                "required": ["type", "timestamp", "data"],
            }
            for entry in described
        ],
    }
