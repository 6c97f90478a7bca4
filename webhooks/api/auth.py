"""Authentication of /v1 requests: ``Authorization: Bearer <api key>`` -> ``g.tenant``.

Two kinds of key, one mechanism (``webhooks.ingest.auth_keys``): a tenant key acts for its
tenant on the plain ``/v1/…`` routes; a platform key manages tenants on ``/v1/tenants…`` and
acts for any of them on ``/v1/tenants/<id or uid>/…``, the same views registered a second time
under that prefix (``webhooks.api.register_blueprints``). The prefix's ``tenant_ref`` is taken
out of the view's arguments into ``g.tenant_ref`` before the views run. A key on the other
kind's route is a 403 that says which key the route takes.
"""

from __future__ import annotations

from typing import Any, NoReturn

from flask import g, request
from flask_smorest import abort

from webhooks.ingest import auth_keys
from webhooks.observability import tracing

#: Sent with every 401 so clients know which scheme to use (RFC 6750).
CHALLENGE = {"WWW-Authenticate": "Bearer"}

#: The path argument naming the tenant a platform key acts for.
TENANT_REF = "tenant_ref"

#: The 403 of a platform key on a plain tenant route.
TENANT_ROUTE = ("this route takes a tenant API key; with a platform key, act for a tenant under "
                "/v1/tenants/<tenant id or uid>{path}")

#: The 403 of a tenant key on a platform route.
PLATFORM_ROUTE = ("this route takes a platform API key (flask platform create-key); "
                  "a tenant API key acts for its own tenant on the plain /v1/… routes")


def _unauthorized(message: str) -> NoReturn:
    abort(401, message=message, headers=CHALLENGE)


def take_tenant_ref(_endpoint: str | None, values: dict[str, Any] | None) -> None:
    """``url_value_preprocessor`` of the app: the prefix's tenant goes to ``g``, not to the view."""
    if values and TENANT_REF in values:
        g.tenant_ref = values.pop(TENANT_REF)


def _key_holder() -> auth_keys.KeyHolder:
    """Who the request's key speaks for, or 401."""
    header = request.headers.get("Authorization", "").strip()
    if not header:
        _unauthorized("missing Authorization header: send 'Authorization: Bearer <api key>'")
    scheme, _, key = header.partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key:
        _unauthorized("malformed Authorization header: expected 'Bearer <api key>'")
    holder = auth_keys.authenticate_key(key)
    if holder is None:
        _unauthorized("invalid API key (unknown or revoked)")
    #: The key's id (never its secret): who asked, for what is recorded (resends, recovers).
    g.api_key_id = holder.key_id
    return holder


def tenant_for_platform(ref: str) -> auth_keys.Tenant:
    """The live tenant a platform key names by id or uid, or 404."""
    tenant = auth_keys.tenant_by_ref(ref)
    if tenant is None:
        abort(404, message="tenant not found")
    return tenant


def require_tenant() -> None:
    """``before_request`` of the tenant blueprints: store the tenant acted for in ``g.tenant``.

    On a plain route it is the tenant key's own; under ``/v1/tenants/<ref>/`` the platform key's
    choice. 401 without a valid key, 403 with the other kind, 404 for an unknown tenant.
    (A client's requests reach here in turns, one at a time while others are active:
    ``webhooks.server.turns`` in the web server, before a thread is taken.)
    """
    holder = _key_holder()
    ref = g.get("tenant_ref")
    if ref is None:
        if holder.is_platform:
            abort(403, message=TENANT_ROUTE.format(path=request.path.removeprefix("/v1")))
        g.tenant = holder.tenant
        tracing.annotate(tenant_id=holder.tenant.id)
        return
    if not holder.is_platform:
        abort(403, message=PLATFORM_ROUTE)
    g.tenant = tenant_for_platform(ref)
    tracing.annotate(tenant_id=g.tenant.id)


def require_platform() -> None:
    """``before_request`` of ``/v1/tenants``: a platform key, else 401 or 403."""
    if not _key_holder().is_platform:
        abort(403, message=PLATFORM_ROUTE)


def require_any_key() -> None:
    """``before_request`` of what both kinds of key read (the event-type catalog): a valid key, else 401.
    ``g.tenant`` is the tenant key's tenant, None for a platform key."""
    g.key_holder = _key_holder()
    g.tenant = g.key_holder.tenant


def require_platform_key(what: str) -> None:
    """Inside a route ``require_any_key`` guards: 403 unless the key is the platform's, naming ``what`` it takes."""
    if not g.key_holder.is_platform:
        abort(403, message=f"{what} takes a platform API key (flask platform create-key); a tenant API key reads only")
