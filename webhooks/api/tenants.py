"""/v1/tenants (platform key): create, list and search, read, change and delete the platform's tenants,
and open their portal (one-time access links, ending every session: ``webhooks.portal.access``).

Acting for one tenant (its events, endpoints, keys …) is the tenant routes under
``/v1/tenants/<id or uid>/…`` (``webhooks.api.register_blueprints``); this module is the
tenants themselves.
"""

from __future__ import annotations

from typing import Any, NoReturn

import peewee
from flask import g, url_for
from flask.views import MethodView
from flask_smorest import abort

from webhooks import tenants
from webhooks.api.auth import require_platform, tenant_for_platform
from webhooks.api.common import cursor_page
from webhooks.api.parsing import Blueprint
from webhooks.api.platform_routes import TENANT_REF_PARAMETER
from webhooks.api.tenant_schemas import (
    PortalAccessSchema, PortalLinkSchema, PortalSessionsEndedSchema, TenantCreateSchema, TenantListArgsSchema,
    TenantPageSchema, TenantSchema, TenantUpdateSchema,
)
from webhooks.portal import access
from webhooks.storage.models import Tenant

blp = Blueprint("tenants", __name__, url_prefix="/v1/tenants",
                description="Tenants, your customers (platform key): each with its own endpoints, events and keys")
blp.before_request(require_platform)


def _conflict(error: tenants.TenantTaken) -> NoReturn:
    abort(409, message=str(error), errors={"json": {error.field: [str(error)]}})


def _containing(field: peewee.Field, text: str) -> peewee.Node:
    """``field`` contains ``text``, any case, with ``%`` and ``_`` taken literally."""
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return peewee.NodeList((peewee.fn.LOWER(field), peewee.SQL("LIKE"), f"%{escaped}%", peewee.SQL("ESCAPE '\\'")))


@blp.route("")
class Tenants(MethodView):
    @blp.arguments(TenantListArgsSchema, location="query")
    @blp.response(200, TenantPageSchema)
    def get(self, args: dict[str, Any]) -> dict[str, Any]:
        """The live tenants, oldest first, a page at a time; `search` matches name and uid."""
        query = Tenant.select().where(Tenant.deleted_at.is_null())
        if "search" in args:
            query = query.where(_containing(Tenant.name, args["search"]) | _containing(Tenant.uid, args["search"]))
        return cursor_page(query, Tenant.id, limit=args["limit"], after=args.get("cursor"))

    @blp.arguments(TenantCreateSchema)
    @blp.response(201, TenantSchema)
    @blp.alt_response(409, description="Another tenant has this name or uid.")
    def post(self, data: dict[str, Any]) -> tuple[Tenant, dict[str, str]]:
        """Create a tenant. It has no API key: act for it with your platform key under `/v1/tenants/<id or uid>/`,
        or issue it keys there (`POST /v1/tenants/<id or uid>/api-keys`)."""
        try:
            tenant = tenants.create_tenant(data["name"], data.get("uid"), data.get("metadata"))
        except tenants.TenantTaken as error:
            _conflict(error)
        return tenant, {"Location": url_for("tenants.TenantItem", tenant_ref=tenant.id)}


@blp.route("/<tenant_ref>", parameters=[TENANT_REF_PARAMETER])
class TenantItem(MethodView):
    @blp.response(200, TenantSchema)
    def get(self) -> Tenant:
        """One tenant, by its id or its uid."""
        return tenant_for_platform(g.tenant_ref)

    @blp.arguments(TenantUpdateSchema)
    @blp.response(200, TenantSchema)
    @blp.alt_response(409, description="Another tenant has this name or uid.")
    def patch(self, data: dict[str, Any]) -> Tenant:
        """Change the name, uid (`null` clears it) or metadata (replaced whole)."""
        try:
            return tenants.update_tenant(tenant_for_platform(g.tenant_ref), data)
        except tenants.TenantTaken as error:
            _conflict(error)

    @blp.response(204)
    def delete(self) -> None:
        """Delete the tenant, safely while its deliveries are in flight: at once its keys stop, it takes no
        events, its endpoints are deleted and its unfinished deliveries cancelled (an attempt already under way
        ends and is recorded); its portal sessions end; its name and uid are free again. Its data is purged an hour
        later."""
        tenants.delete_tenant(tenant_for_platform(g.tenant_ref))


@blp.route("/<tenant_ref>/portal-access", parameters=[TENANT_REF_PARAMETER])
class PortalAccess(MethodView):
    @blp.arguments(PortalAccessSchema, required=False)
    @blp.response(201, PortalLinkSchema)
    def post(self, data: dict[str, Any]) -> access.AccessLink:
        """A one-time link to the tenant's portal: it opens once, before `expires_at`, and starts a session
        (`PORTAL_SESSION_TTL`, 12 h by default) with these capabilities. The tenant's API key never reaches
        the browser."""
        tenant = tenant_for_platform(g.tenant_ref)
        try:
            return access.create_link(tenant, data.get("capabilities"), data.get("expires_in"))
        except access.AccessError as error:
            abort(422, errors={"json": {error.field: [str(error)]}})


@blp.route("/<tenant_ref>/portal-sessions", parameters=[TENANT_REF_PARAMETER])
class PortalSessions(MethodView):
    @blp.response(200, PortalSessionsEndedSchema)
    def delete(self) -> dict[str, int]:
        """End every portal session of the tenant at once, and void its links not opened yet."""
        return {"ended": access.end_sessions(tenant_for_platform(g.tenant_ref))}
