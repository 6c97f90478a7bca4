"""Event type names: what a tenant may send, and the operational types the service raises."""

from __future__ import annotations

#: Raised by the service about endpoints and deliveries; tenants cannot POST them, so
#: no tenant can raise one about another's endpoint.
OPERATIONAL_EVENT_TYPES = frozenset({"endpoint.offline", "endpoint.online", "endpoint.disabled", "delivery.exhausted"})

#: What an event type may look like: short, and safe as it is in URLs, logs and filters.
EVENT_TYPE_PATTERN = r"^[A-Za-z0-9_.-]{1,128}$"


def wants(endpoint_types: list[str], event_type: str) -> bool:
    """Does an endpoint subscribed to ``endpoint_types`` get ``event_type``?

    An empty list means every type, except operational ones, which must be listed.
    """
    if event_type in endpoint_types:
        return True
    return not endpoint_types and event_type not in OPERATIONAL_EVENT_TYPES
