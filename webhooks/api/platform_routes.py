"""The tenant routes a second way in: every tenant blueprint registered again under
``/v1/tenants/<tenant_ref>/…`` for platform keys (the same views, no copies), and the OpenAPI
document's two security schemes.

The prefix's ``tenant_ref`` (a tenant's id or uid) leaves the view's arguments for
``g.tenant_ref`` (``auth.take_tenant_ref``), and ``auth.require_tenant`` resolves it; a URL built
with a relative endpoint (``url_for(".Event", …)``) inside such a request keeps the prefix.
"""

from __future__ import annotations

from typing import Any

from apispec import BasePlugin
from flask import Flask, g
from flask_smorest import Api, Blueprint

from webhooks.api.auth import TENANT_REF, take_tenant_ref

#: OpenAPI name of the tenant key scheme (every plain ``/v1/…`` route).
TENANT_SCHEME = "bearerAuth"

#: OpenAPI name of the platform key scheme (``/v1/tenants…``).
PLATFORM_SCHEME = "platformAuth"

#: The paths that take a platform key.
PLATFORM_PREFIX = "/v1/tenants"

#: The paths both keys read and only a platform key writes (the event-type catalog).
CATALOG_PREFIX = "/v1/event-types"

#: A second registration's blueprint name: ``events`` -> ``events_for_tenant``.
SUFFIX = "_for_tenant"

#: The ``tenant_ref`` path parameter, as documented.
TENANT_REF_PARAMETER = {
    "in": "path", "name": TENANT_REF, "required": True,
    "description": "The tenant: its id (`ten_…`) or its uid.",
    "schema": {"type": "string", "pattern": r"^[A-Za-z0-9_.:-]{1,64}$"},
}

SCHEMES = {
    TENANT_SCHEME: {"type": "http", "scheme": "bearer",
                    "description": "A tenant API key, `<key_id>.<secret>`: the plain `/v1/…` routes, for its tenant."},
    PLATFORM_SCHEME: {"type": "http", "scheme": "bearer",
                      "description": "A platform API key (`flask platform create-key NAME`), `<key_id>.<secret>`: "
                                     "`/v1/tenants…`, and every tenant route for any tenant under "
                                     "`/v1/tenants/{tenant_ref}/…`."},
}


def security_of(path: str, method: str) -> list[dict[str, list[str]]] | None:
    """The keys an operation takes, when not the document's default (a tenant key)."""
    if path.startswith(PLATFORM_PREFIX):
        return [{PLATFORM_SCHEME: []}]
    if path.startswith(CATALOG_PREFIX):
        return [{TENANT_SCHEME: []}, {PLATFORM_SCHEME: []}] if method == "get" else [{PLATFORM_SCHEME: []}]
    return None


class KeySchemesPlugin(BasePlugin):
    """Operations under ``/v1/tenants`` name the platform scheme, the catalog's reads either scheme and its
    writes the platform's; the rest keep the document's default."""

    def operation_helper(self, path: str | None = None, operations: dict[str, Any] | None = None,
                         **kwargs: Any) -> None:
        for method, operation in (operations or {}).items():
            security = security_of(path or "", method)
            if security is not None and method != "parameters" and isinstance(operation, dict):
                operation["security"] = security


def document_schemes(api: Api) -> None:
    for name, scheme in SCHEMES.items():
        api.spec.components.security_scheme(name, scheme)


def keep_tenant_ref(endpoint: str, values: dict[str, Any]) -> None:
    """``url_defaults``: inside a request acting for a tenant, its routes' URLs keep the prefix."""
    ref = g.get("tenant_ref")
    if ref is not None and endpoint.partition(".")[0].endswith(SUFFIX):
        values.setdefault(TENANT_REF, ref)


def register_for_tenant(api: Api, app: Flask, blueprint: Blueprint) -> None:
    """``blueprint`` (a ``/v1/<x>`` tenant blueprint) again, at ``/v1/tenants/<tenant_ref>/<x>``."""
    prefix = f"{PLATFORM_PREFIX}/<{TENANT_REF}>{blueprint.url_prefix.removeprefix('/v1')}"
    api.register_blueprint(blueprint, url_prefix=prefix, name=blueprint.name + SUFFIX,
                           parameters=[TENANT_REF_PARAMETER])


def init_app(app: Flask) -> None:
    app.url_value_preprocessor(take_tenant_ref)
    app.url_defaults(keep_tenant_ref)
