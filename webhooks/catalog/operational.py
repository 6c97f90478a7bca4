"""The operational event types (decision 15) as catalog entries: their payload schemas and an
example each, so receivers can rely on them. Built in: listed with the catalog, never written."""

from __future__ import annotations

from typing import Any

#: The group they are listed under.
GROUP = "operational"

_TEXT = {"type": "string"}
_TIME = {"type": "string", "format": "date-time"}
_NULLABLE_TEXT = {"type": ["string", "null"]}

_PRESENCE = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "endpoint_id": _TEXT, "url": _TEXT, "reason": _TEXT,
        "health": {"enum": ["online", "offline", "recovering", "disabled"]}, "occurred_at": _TIME,
    },
    "required": ["endpoint_id", "url", "reason", "occurred_at"],
}

_EXHAUSTED = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "endpoint_id": _TEXT, "url": _TEXT, "reason": _TEXT, "delivery_id": _TEXT, "event_id": _TEXT,
        "event_type": _TEXT, "attempts": {"type": "integer", "minimum": 1}, "last_error": _NULLABLE_TEXT,
        "occurred_at": _TIME,
    },
    "required": ["endpoint_id", "url", "delivery_id", "event_id", "event_type", "attempts", "occurred_at"],
}

def _presence_example(health: str, reason: str) -> dict[str, Any]:
    return {"endpoint_id": "ep_01JDZ8Q9V3K6M2N4P5R7S8T9VW", "url": "https://example.com/hooks", "reason": reason,
            "health": health, "occurred_at": "2026-11-26T12:00:00.000Z"}

#: name -> (description, schema, examples); the names are ``OPERATIONAL_EVENT_TYPES``.
ENTRIES: dict[str, tuple[str, dict[str, Any], list[dict[str, Any]]]] = {
    "endpoint.offline": ("An endpoint stopped answering: its deliveries wait, parked, until it is back.", _PRESENCE,
                         [_presence_example("offline", "5 consecutive failures (HTTP 503)")]),
    "endpoint.online": ("An endpoint answers again: what it missed is released in order.", _PRESENCE,
                        [_presence_example("recovering", "a probe succeeded (HTTP 200)")]),
    "endpoint.disabled": ("An endpoint was disabled (by a person, a 410, or failing for too long).", _PRESENCE,
                          [_presence_example("disabled", "HTTP 410 Gone")]),
    "delivery.exhausted": ("A delivery failed its last attempt: it is in the dead-letter list.", _EXHAUSTED, [{
        "endpoint_id": "ep_01JDZ8Q9V3K6M2N4P5R7S8T9VW", "url": "https://example.com/hooks", "reason": "HTTP 500",
        "delivery_id": "dlv_01JDZ8Q9V3K6M2N4P5R7S8T9VX", "event_id": "evt_01JDZ8Q9V3K6M2N4P5R7S8T9VY",
        "event_type": "order.created", "attempts": 10, "last_error": "HTTP 500",
        "occurred_at": "2026-11-26T12:00:00.000Z",
    }]),
}
