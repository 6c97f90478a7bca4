"""HTTP API blueprints: /v1 (tenant key required) and the operations routes."""

from __future__ import annotations

from flask_smorest import Api

from webhooks.api import deliveries, endpoints, events, keys, ops


def register_blueprints(api: Api) -> None:
    """Register every blueprint (routes and OpenAPI documentation) on ``api``."""
    for module in (endpoints, events, deliveries, keys, ops):
        api.register_blueprint(module.blp)
