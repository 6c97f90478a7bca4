"""Tenant authentication of /v1 requests: ``Authorization: Bearer <api key>`` -> ``g.tenant``."""

from __future__ import annotations

from flask import g, request
from flask_smorest import abort

from webhooks.ingest import auth_keys
from webhooks.observability import tracing

#: Sent with every 401 so clients know which scheme to use (RFC 6750).
CHALLENGE = {"WWW-Authenticate": "Bearer"}


def _unauthorized(message: str) -> None:
    abort(401, message=message, headers=CHALLENGE)


def require_tenant() -> None:
    """``before_request`` of the /v1 blueprints: store the key's tenant in ``g.tenant`` or 401.

    (A client's requests reach here in turns, one at a time while others are active:
    ``webhooks.server.turns`` in the web server, before a thread is taken.)
    """
    header = request.headers.get("Authorization", "").strip()
    if not header:
        _unauthorized("missing Authorization header: send 'Authorization: Bearer <api key>'")
    scheme, _, key = header.partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key:
        _unauthorized("malformed Authorization header: expected 'Bearer <api key>'")
    tenant = auth_keys.authenticate(key)
    if tenant is None:
        _unauthorized("invalid API key (unknown or revoked)")
    g.tenant = tenant
    tracing.annotate(tenant_id=tenant.id)
    #: The key's id (never its secret): who asked, for what is recorded (resends, recovers).
    g.api_key_id = key.partition(".")[0]
