"""HTTP API blueprints: /v1 (tenant key required) and the operations routes."""

from __future__ import annotations

from flask_smorest import Api
from werkzeug.routing import BaseConverter

from webhooks.api import deliveries, endpoints, events, keys, ops


class EventIdConverter(BaseConverter):
    """``/v1/events/<event_id:…>``: any segment but ``batch``, so ``/v1/events/batch`` is not also an
    event (its ``Allow`` header then names POST alone, as the document says). Other malformed ids
    still reach the view, which answers the same 404 as for an unknown id."""

    regex = r"(?!batch$)[^/]+"


def register_blueprints(api: Api) -> None:
    """Register every blueprint (routes and OpenAPI documentation) on ``api``."""
    api._app.url_map.converters["event_id"] = EventIdConverter
    api.register_converter(EventIdConverter, lambda _: {"type": "string", "not": {"enum": ["batch"]}})
    for module in (endpoints, events, deliveries, keys, ops):
        api.register_blueprint(module.blp)
