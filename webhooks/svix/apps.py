"""Svix applications are our tenants (``uid`` is ``uid``): list, create (or get by uid), read,
upsert, patch and delete, through ``webhooks.tenants`` and checked by the ``/v1/tenants`` schemas."""

from __future__ import annotations

from typing import Any

from flask import Blueprint

from webhooks import tenants
from webhooks.api.tenant_schemas import TenantCreateSchema, TenantUpdateSchema
from webhooks.ingest import auth_keys
from webhooks.storage.models import Tenant
from webhooks.svix import wire

#: Application fields we take from a Svix body, by their Svix name.
FIELDS = {"name": "name", "uid": "uid", "metadata": "metadata"}

#: Fields the Svix API has and we accept, check and ignore (the ingest rate is per tenant key, not per application).
IGNORED = ("throttleRate", "rateLimit")

CREATE, UPDATE = TenantCreateSchema(), TenantUpdateSchema()

blp = Blueprint("svix_apps", __name__)


def show(tenant: Tenant) -> dict[str, Any]:
    """A tenant as a Svix ``ApplicationOut``."""
    return {"id": tenant.id, "uid": tenant.uid, "name": tenant.name, "metadata": tenant.metadata or {},
            "createdAt": wire.timestamp(tenant.created_at), "updatedAt": wire.timestamp(tenant.created_at),
            "throttleRate": None, "rateLimit": None}


def app_for(ref: str) -> Tenant:
    """The live tenant a Svix ``app_id`` names (our id or its uid), or 404."""
    tenant = auth_keys.tenant_by_ref(ref)
    if tenant is None:
        wire.fail(404, "application not found")
    return tenant


def _fields(data: dict[str, Any]) -> dict[str, Any]:
    """A Svix application body as our tenant fields (unknown fields ignored, as the Svix server does)."""
    for name in IGNORED:
        value = data.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            wire.invalid(["body", name], "must be a non-negative integer")
    return {ours: data[theirs] for theirs, ours in FIELDS.items() if theirs in data}


def create(fields: dict[str, Any]) -> Tenant:
    try:
        return tenants.create_tenant(fields["name"], fields.get("uid"), fields.get("metadata"))
    except tenants.TenantTaken as error:
        wire.fail(409, str(error))


def _update(tenant: Tenant, fields: dict[str, Any]) -> Tenant:
    try:
        return tenants.update_tenant(tenant, fields)
    except tenants.TenantTaken as error:
        wire.fail(409, str(error))


def create_from(data: dict[str, Any]) -> Tenant:
    """A new application from a Svix ``ApplicationIn`` body (also a message's ``application``)."""
    return create(wire.load(CREATE, _fields(data)))


@blp.get("/app")
def list_apps() -> dict[str, Any]:
    return wire.page(Tenant.select().where(Tenant.deleted_at.is_null()), Tenant.id, show)


@blp.post("/app")
def create_app() -> tuple[dict[str, Any], int]:
    """201 with a new application; with ``?get_if_exists=true``, 200 with the one already having this uid."""
    fields = wire.load(CREATE, _fields(wire.body()))
    if wire.flag("get_if_exists") and fields.get("uid"):
        existing = auth_keys.tenant_by_ref(fields["uid"])
        if existing is not None and existing.uid == fields["uid"]:
            return show(existing), 200
    return show(create(fields)), 201


@blp.get("/app/<app_id>")
def get_app(app_id: str) -> dict[str, Any]:
    return show(app_for(app_id))


@blp.put("/app/<app_id>")
def upsert_app(app_id: str) -> tuple[dict[str, Any], int]:
    """Replace the application's fields (metadata and uid cleared when absent), or create it with ``app_id`` as its uid."""
    fields = wire.load(CREATE, _fields(wire.body()))
    tenant = auth_keys.tenant_by_ref(app_id)
    if tenant is None:
        return show(create({"uid": app_id, **fields})), 201
    return show(_update(tenant, {"uid": None, "metadata": {}, **fields})), 200


@blp.patch("/app/<app_id>")
def patch_app(app_id: str) -> dict[str, Any]:
    tenant = app_for(app_id)
    return show(_update(tenant, wire.load(UPDATE, _fields(wire.body()), partial=True)))


@blp.delete("/app/<app_id>")
def delete_app(app_id: str) -> tuple[str, int]:
    tenants.delete_tenant(app_for(app_id))
    return "", 204
