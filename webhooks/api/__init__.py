"""The HTTP API: /v1 (tenant key), /v1/tenants (platform key) and the operations routes.

``events`` (with ``fast_ingest``, the WSGI fast path of ``POST /v1/events`` and its
batch), ``endpoints`` (with ``tryouts``), ``deliveries``, ``keys``, ``tenants``, ``event_types`` (the catalog)
and ``ops`` are the blueprints; the tenant ones answer a second time under ``/v1/tenants/<id or uid>/``
(``platform_routes``);
``schemas``, ``endpoint_schemas``, ``key_schemas`` and ``tenant_schemas`` say what a request may hold and how each object is shown, ``parsing`` and
``common`` are what the views share, ``auth`` resolves the bearer key and ``error_docs``
documents the errors in the OpenAPI document.

May import: every stage (``storage``, ``messaging``, ``ingest``, ``health``,
``delivery``), the shared modules at the top and ``actions`` and ``readiness``; not the
console.
"""

from __future__ import annotations

from flask_smorest import Api
from werkzeug.routing import BaseConverter

from webhooks.api import deliveries, endpoints, event_types, events, keys, ops, platform_routes, tenants, tryouts
from webhooks.api.fields import FILTER_COMPONENT
from webhooks.catalog.filters import openapi_schema

#: The blueprints a tenant key uses at ``/v1/…`` and a platform key at ``/v1/tenants/<id or uid>/…``.
TENANT_BLUEPRINTS = (endpoints, tryouts, events, deliveries, keys)


class EventIdConverter(BaseConverter):
    """``/v1/events/<event_id:…>``: any segment but ``batch``, so ``/v1/events/batch`` is not also an
    event (its ``Allow`` header then names POST alone, as the document says). Other malformed ids
    still reach the view, which answers the same 404 as for an unknown id."""

    regex = r"(?!batch$)[^/]+"


def register_blueprints(api: Api) -> None:
    """Register every blueprint (routes and OpenAPI documentation) on ``api``."""
    api._app.url_map.converters["event_id"] = EventIdConverter
    api.register_converter(EventIdConverter, lambda _: {"type": "string", "not": {"enum": ["batch"]}})
    api.spec.components.schema(FILTER_COMPONENT, component=openapi_schema(f"#/components/schemas/{FILTER_COMPONENT}"))
    for module in (*TENANT_BLUEPRINTS, tenants, event_types, ops):
        api.register_blueprint(module.blp)
    api.register_blueprint(event_types.schema_blp)
    for module in TENANT_BLUEPRINTS:
        platform_routes.register_for_tenant(api, api._app, module.blp)
    platform_routes.init_app(api._app)
