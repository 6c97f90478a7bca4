"""The one payload every contender sends: an order event of about 1 KB of JSON."""

from __future__ import annotations

import json
from typing import Any

EVENT_TYPE = "order.created"

#: The event's payload (``data``); about 1 KB once wrapped as a webhook body.
PAYLOAD: dict[str, Any] = {
    "order": {
        "id": "ord_01HZX3K4R8M2",
        "customer": {"id": "cus_9f8e7d6c", "email": "ada@example.com", "country": "DE"},
        "amount": 4200,
        "currency": "EUR",
        "lines": [{"sku": f"sku-{i:04d}", "qty": i % 5 + 1, "unit_amount": 100 + 7 * i} for i in range(15)],
        "shipping": {"method": "standard", "street": "Unter den Linden 1", "city": "Berlin", "postcode": "10117"},
    }
}


def event_request(event_type: str = EVENT_TYPE) -> bytes:
    """Body of ``POST /v1/events``."""
    return json.dumps({"event_type": event_type, "payload": PAYLOAD}, separators=(",", ":")).encode()


def batch_request(event_types: list[str]) -> bytes:
    """Body of ``POST /v1/events/batch``: one event of each of ``event_types``, in that order."""
    return json.dumps([{"event_type": event_type, "payload": PAYLOAD} for event_type in event_types],
                      separators=(",", ":")).encode()


def webhook_body() -> bytes:
    """What a receiver gets: the Standard Webhooks body the service would send for this event."""
    return json.dumps({"type": EVENT_TYPE, "timestamp": "2026-11-22T12:00:00.000000Z", "data": PAYLOAD},
                      separators=(",", ":")).encode()
