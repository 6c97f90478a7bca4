"""Another tenant's objects: the /v1 routes that name one, the ``victim`` fixture that makes them,
and ``snapshot`` of what is stored about them (for the tenant-isolation and platform tests).

Registered as a plugin in ``tests/conftest.py``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable

import pytest
from flask.testing import FlaskClient

from tests.api_helpers import create_endpoint, make_attempt, post_event
from webhooks.storage.models import ApiKey, Attempt, Delivery, Endpoint, Event

#: Every /v1 route that names an object: (method, path, JSON body valid apart from the id).
OBJECT_ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/v1/endpoints/{endpoint}", None),
    ("PATCH", "/v1/endpoints/{endpoint}", {"description": "hijacked", "disabled": True}),
    ("DELETE", "/v1/endpoints/{endpoint}", None),
    ("GET", "/v1/endpoints/{endpoint}/health", None),
    ("GET", "/v1/endpoints/{endpoint}/secret", None),
    ("POST", "/v1/endpoints/{endpoint}/secret/rotate", {}),
    ("POST", "/v1/endpoints/{endpoint}/recover", {"since": "2000-01-01T00:00:00Z"}),
    ("POST", "/v1/endpoints/{endpoint}/probe", None),
    ("POST", "/v1/endpoints/{endpoint}/filter/test", {"event_type": "order.created", "payload": {}}),
    ("POST", "/v1/endpoints/{endpoint}/send-example", {"event_type": "order.created"}),
    ("GET", "/v1/endpoints/{endpoint}/attempts", None),
    ("GET", "/v1/events/{event}", None),
    ("GET", "/v1/events/{event}/attempts", None),
    ("GET", "/v1/deliveries/{delivery}", None),
    ("GET", "/v1/deliveries/{delivery}/attempts", None),
    ("POST", "/v1/deliveries/{delivery}/resend", None),
    ("GET", "/v1/api-keys/{key}", None),
    ("DELETE", "/v1/api-keys/{key}", None),
    ("POST", "/v1/api-keys/{key}/rotate", {"overlap": "0s"}),
]

#: The noun a 404 names, by the kind of object a route's path names.
NOUNS = {"endpoint": "endpoint", "event": "event", "delivery": "delivery", "key": "API key"}


def object_kind(path: str) -> str:
    """The kind of object a path of ``OBJECT_ROUTES`` names: ``/v1/events/{event}`` → ``event``."""
    return path.split("{")[1].split("}")[0]


@pytest.fixture
def victim(client: FlaskClient, other_tenant: SimpleNamespace, auth: Callable[..., dict[str, str]]) -> dict[str, str]:
    """Tenant B's endpoint, event, failed delivery and attempt (ids by kind)."""
    headers = auth(other_tenant)
    endpoint = create_endpoint(client, headers)
    event = post_event(client, headers).json
    delivery_id = event["deliveries"][0]["id"]
    Delivery.update(status="failed", attempts=1).where(Delivery.id == delivery_id).execute()
    attempt = make_attempt(delivery_id, 1)
    return {
        "endpoint": endpoint["id"],
        "event": event["id"],
        "delivery": delivery_id,
        "attempt": attempt.id,
        "secret": endpoint["secret"],
        "key": other_tenant.api_key.partition(".")[0],
    }


def snapshot(ids: dict[str, str]) -> list[dict[str, Any]]:
    """Everything stored about the victim's objects."""
    return [
        Endpoint.get_by_id(ids["endpoint"]).__data__,
        Event.get_by_id(ids["event"]).__data__,
        Delivery.get_by_id(ids["delivery"]).__data__,
        *[row.__data__ for row in Attempt.select().where(Attempt.delivery == ids["delivery"])],
        ApiKey.get_by_id(ids["key"]).__data__,
    ]
