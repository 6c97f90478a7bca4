"""The Svix API's common subset at ``/api/v1/…``, a second way in for the Svix SDKs: a translation
layer onto our own models and the functions the ``/v1`` views call, authenticated by a platform key.

``wire`` holds the wire rules (camelCase, pages, errors); ``apps`` maps applications to tenants, ``endpoints`` endpoints to ours,
``messages`` messages to events, ``attempts`` attempts (and resends) to ours,
``event_types`` event types to the catalog, ``portal`` app-portal access to our portal's one-time links;
``idempotency`` answers a repeated POST (same ``idempotency-key``) with its first answer.
May import what ``webhooks.api`` imports, and ``webhooks.api`` itself (its schemas and key check).
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Flask, request

from webhooks.api.auth import require_platform
from webhooks.svix import apps, attempts, endpoints, event_types, idempotency, messages, portal, wire

blp = Blueprint("svix", __name__, url_prefix=wire.PREFIX)


@blp.get("/health")
def health() -> tuple[str, int]:
    """The Svix health check: 204 when this process answers (readiness is ``/readyz``)."""
    return "", 204


@blp.before_request
def _authenticate() -> None:
    """Every route but health takes a platform key as its bearer token."""
    if request.endpoint != "svix.health":
        require_platform()


blp.before_request(idempotency.begin)
blp.after_request(idempotency.finish)
blp.teardown_request(idempotency.abandon)


for _part in (apps, endpoints, messages, attempts, event_types, portal):
    blp.register_blueprint(_part.blp)


def init_app(app: Flask) -> None:
    """Register the Svix routes at ``/api/v1``."""
    app.register_blueprint(blp)


def owns(path: str) -> bool:
    return wire.owns(path)


def error_response(error: Any) -> tuple[dict[str, Any], int, dict[str, str]]:
    return wire.error_response(error)
