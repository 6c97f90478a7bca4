"""Helpers of the API and end-to-end tests: endpoint and event factories, attempt rows, row counts,
the paths that reached the Flask views."""

from __future__ import annotations

import itertools
import time
from typing import Any

from flask import Flask, request
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from webhooks.storage.ids import new_id
from webhooks.storage.models import ALL_MODELS, Attempt, Delivery
from webhooks.storage.timeutil import utcnow

#: Where test endpoints point (private targets are allowed in tests; nothing listens there).
HOOK_URL = "http://127.0.0.1:9/hook"

#: An AMQP URL where no broker listens: the app behaves as during a broker outage.
DEAD_AMQP_URL = "amqp://guest:guest@127.0.0.1:1/%2F"

#: Strictly increasing milliseconds for attempt ids, so "newest first" is well defined.
_attempt_clock = itertools.count(int(time.time() * 1000))


def create_endpoint(client: FlaskClient, headers: dict[str, str], url: str = HOOK_URL, *, prefix: str = "/v1",
                    **fields: Any) -> dict[str, Any]:
    """Register an endpoint (``url`` defaults to ``HOOK_URL``) and return the 201 body; ``prefix``
    ``/v1/tenants/<id or uid>`` registers it for that tenant with a platform key."""
    response = client.post(f"{prefix}/endpoints", json={"url": url, **fields}, headers=headers)
    assert response.status_code == 201, response.json
    return response.json


def post_event(
    client: FlaskClient,
    headers: dict[str, str],
    event_type: str = "order.created",
    payload: dict[str, Any] | None = None,
    *,
    prefix: str = "/v1",
    **fields: Any,
) -> TestResponse:
    """POST an event and return the response (not asserted: callers check bad cases too); ``prefix`` as
    for ``create_endpoint``."""
    body = {"event_type": event_type, "payload": {"order": 1} if payload is None else payload, **fields}
    return client.post(f"{prefix}/events", json=body, headers=headers)


def send(client: FlaskClient, headers: dict[str, str], event_type: str = "order.created",
         payload: dict[str, Any] | None = None, *, prefix: str = "/v1", **fields: Any) -> dict[str, Any]:
    """POST an event that must be accepted (202) and return the event."""
    response = post_event(client, headers, event_type, payload, prefix=prefix, **fields)
    assert response.status_code == 202, response.json
    return response.json


def make_attempt(delivery_id: str, attempt_no: int, **overrides: Any) -> Attempt:
    """Record an attempt of ``delivery_id`` as the worker would (a failed call by default)."""
    delivery = Delivery.get_by_id(delivery_id)
    fields: dict[str, Any] = {
        "id": new_id("att", now_ms=next(_attempt_clock)),
        "delivery": delivery.id,
        "tenant": delivery.tenant_id,
        "event": delivery.event_id,
        "endpoint": delivery.endpoint_id,
        "attempt_no": attempt_no,
        "trigger": "ladder",
        "started_at": utcnow(),
        "duration_ms": 12.5,
        "url": HOOK_URL,
        "request_headers": {"webhook-id": delivery.event_id},
        "response_status": 500,
        "response_headers": {"content-type": "text/plain"},
        "response_body": "boom",
        "outcome": "failed",
    }
    return Attempt.create(**{**fields, **overrides})


def row_counts() -> dict[str, int]:
    """Rows per table, to show a rejected request wrote nothing."""
    return {model.__name__: model.select().count() for model in ALL_MODELS}


def views_run(app: Flask) -> list[str]:
    """Paths that reached Flask's request handling (a before_request hook records them)."""
    seen: list[str] = []
    app.before_request_funcs.setdefault(None, []).append(lambda: seen.append(request.path) and None)
    return seen
