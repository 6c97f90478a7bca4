"""Svix endpoints are our endpoints: list, create, read, replace, patch and delete them, read and
rotate their secret, and recover what failed, through ``webhooks.actions`` and checked by the
``/v1/endpoints`` schemas. ``{endpoint_id}`` is our id or the endpoint's ``uid``. An endpoint's
``channels`` are kept and shown; messages carry none here, so fan-out passes such an endpoint by
(``Endpoint.channels``), as the Svix server passes it for a message without channels."""

from __future__ import annotations

import re
import uuid
from typing import Any

from flask import Blueprint, current_app, g

from webhooks import actions
from webhooks.api.common import api_requester
from webhooks.api.endpoint_schemas import (
    EndpointCreateSchema, EndpointUpdateSchema, RecoverSchema, SecretRotateSchema,
)
from webhooks.delivery.signing import shared_secret
from webhooks.secrecy import mask
from webhooks.storage import db
from webhooks.storage.models import Endpoint, Tenant
from webhooks.storage.timeutil import utcnow
from webhooks.svix import wire
from webhooks.svix.apps import app_for

#: An endpoint's uid, as the Svix API allows it.
UID = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")

#: A channel's name and how many an endpoint listens to, as the Svix API allows them.
CHANNEL, MAX_CHANNELS = re.compile(r"^[A-Za-z0-9_.-]{1,128}$"), 10

#: The longest ``gracePeriodSeconds`` of a rotation (the Svix API's bound: 7 days).
MAX_GRACE = 7 * 24 * 3600

#: Svix endpoint features we lack: a non-empty value is a 422 naming it.
UNSUPPORTED = {"headers": "custom headers are not supported by this service"}

#: ``disabled_reason`` of an endpoint disabled through the Svix API.
DISABLED_BY_REQUEST = "disabled through the API"

CREATE, UPDATE, ROTATE, RECOVER = EndpointCreateSchema(), EndpointUpdateSchema(), SecretRotateSchema(), RecoverSchema()

blp = Blueprint("svix_endpoints", __name__)


def show(endpoint: Endpoint) -> dict[str, Any]:
    """An endpoint as a Svix ``EndpointOut`` (``filterTypes``/``rateLimit`` for older SDKs too)."""
    types = list(endpoint.event_types) or None
    return {"id": endpoint.id, "uid": endpoint.uid, "url": mask(endpoint.url), "description": endpoint.description,
            "metadata": endpoint.metadata or {}, "disabled": endpoint.disabled, "eventTypes": types,
            "filterTypes": types, "channels": endpoint.channels, "throttleRate": endpoint.rate_limit,
            "rateLimit": endpoint.rate_limit, "version": 1, "createdAt": wire.timestamp(endpoint.created_at),
            "updatedAt": wire.timestamp(endpoint.updated_at)}


def tenant_for(app_id: str) -> Tenant:
    """The application's tenant, also as ``g.tenant`` (what the shared API helpers act for)."""
    g.tenant = app_for(app_id)
    return g.tenant


def endpoint_for(app_id: str, ref: str) -> Endpoint:
    """The application's live endpoint with this id or uid, or 404."""
    tenant = tenant_for(app_id)
    live = (Endpoint.tenant == tenant.id) & Endpoint.deleted_at.is_null()
    endpoint = Endpoint.get_or_none(live & (Endpoint.id == ref)) or Endpoint.get_or_none(live & (Endpoint.uid == ref))
    if endpoint is None:
        wire.fail(404, "endpoint not found")
    return endpoint


def _fields(data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A Svix endpoint body as our endpoint fields (for our schemas) and the Svix-only ones (uid, disabled, secret,
    channels)."""
    for name, why in UNSUPPORTED.items():
        if data.get(name):
            wire.invalid(["body", name], why)
    fields = {ours: data[theirs] for theirs, ours in (("url", "url"), ("description", "description"),
                                                       ("metadata", "metadata")) if theirs in data}
    for name in ("filterTypes", "eventTypes"):  # both names, as the Svix server takes them
        if name in data:
            fields["event_types"] = data[name] or []
    for name in ("rateLimit", "throttleRate"):
        if name in data:
            fields["rate_limit"] = data[name]
    extra = {name: data[name] for name in ("uid", "disabled", "secret") if name in data}
    if "channels" in data:
        extra["channels"] = _channels(data["channels"])
    uid = extra.get("uid")
    if uid is not None and (not isinstance(uid, str) or not UID.match(uid)):
        wire.invalid(["body", "uid"], "must be 1 to 64 letters, digits, '_', '.', ':' or '-'")
    if "disabled" in extra and not isinstance(extra["disabled"], bool):
        wire.invalid(["body", "disabled"], "must be a boolean", "type_error.bool")
    return fields, extra


def _channels(value: Any) -> list[str] | None:
    """Up to ten distinct channel names, sorted (none: null, every message)."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(name, str) and CHANNEL.match(name) for name in value):
        wire.invalid(["body", "channels"], "must be a list of names of 1 to 128 letters, digits, '_', '.' or '-'")
    if len(set(value)) != len(value) or len(value) > MAX_CHANNELS:
        wire.invalid(["body", "channels"], f"must be at most {MAX_CHANNELS} distinct names")
    return sorted(value) or None


def _check(tenant: Tenant, fields: dict[str, Any], uid: str | None, but: str | None = None) -> None:
    """422 when the URL may not be called (our SSRF rules), 409 when another live endpoint has ``uid``."""
    stored = Endpoint.get_by_id(but) if but is not None else None  # a masked URL sent back keeps its password
    for name, problem in actions.check_destinations(fields, stored, current_app.extensions["webhooks.settings"]).items():
        wire.invalid(["body", name], problem)
    if uid is not None:
        taken = Endpoint.get_or_none((Endpoint.tenant == tenant.id) & (Endpoint.uid == uid)
                                     & Endpoint.deleted_at.is_null())
        if taken is not None and taken.id != but:
            wire.fail(409, f"an endpoint with the uid {uid!r} already exists ({taken.id})")


def _secret(value: Any) -> str:
    """A Svix secret (``whsec_`` optional) checked as our rotation checks one."""
    text = value if isinstance(value, str) else ""
    return wire.load(ROTATE, {"secret": text if text.startswith("whsec_") else "whsec_" + text})["secret"]


def _apply(endpoint: Endpoint, changes: dict[str, Any], extra: dict[str, Any]) -> Endpoint:
    """Our changes, then enabling or disabling as the /v1 view does (releasing what was parked)."""
    with db.write():
        actions.update_endpoint(endpoint, changes)
        disabled = extra.get("disabled")
        if disabled is not None and disabled != endpoint.disabled:
            actions.set_endpoint_disabled(endpoint, disabled, DISABLED_BY_REQUEST if disabled else None)
    return Endpoint.get_by_id(endpoint.id)


def _create(tenant: Tenant, fields: dict[str, Any], extra: dict[str, Any]) -> Endpoint:
    checked = wire.load(CREATE, fields)
    secret = _secret(extra["secret"]) if extra.get("secret") is not None else None
    _check(tenant, checked, extra.get("uid"))
    settings = current_app.extensions["webhooks.settings"]
    try:
        endpoint = actions.create_endpoint(tenant.id, {**checked, "uid": extra.get("uid"),
                                                       "channels": extra.get("channels")}, scheme="v1",
                                           max_endpoints=settings.max_endpoints_per_tenant)
    except actions.EndpointLimitReached as error:
        wire.fail(409, str(error))
    if secret is not None:
        endpoint = actions.rotate_secret(endpoint, 0, "v1", secret)
    return _apply(endpoint, {}, extra) if extra.get("disabled") else endpoint


@blp.get("/app/<app_id>/endpoint")
def list_endpoints(app_id: str) -> dict[str, Any]:
    tenant = tenant_for(app_id)
    query = Endpoint.select().where((Endpoint.tenant == tenant.id) & Endpoint.deleted_at.is_null())
    return wire.page(query, Endpoint.id, show)


@blp.post("/app/<app_id>/endpoint")
def create_endpoint(app_id: str) -> tuple[dict[str, Any], int]:
    tenant = tenant_for(app_id)
    return show(_create(tenant, *_fields(wire.body()))), 201


@blp.get("/app/<app_id>/endpoint/<endpoint_id>")
def get_endpoint(app_id: str, endpoint_id: str) -> dict[str, Any]:
    return show(endpoint_for(app_id, endpoint_id))


@blp.put("/app/<app_id>/endpoint/<endpoint_id>")
def update_endpoint(app_id: str, endpoint_id: str) -> tuple[dict[str, Any], int]:
    """Replace the endpoint's fields (absent ones back to their defaults), or create it with ``endpoint_id`` as uid."""
    tenant = tenant_for(app_id)
    fields, extra = _fields(wire.body())
    live = (Endpoint.tenant == tenant.id) & Endpoint.deleted_at.is_null()
    endpoint = Endpoint.get_or_none(live & ((Endpoint.id == endpoint_id) | (Endpoint.uid == endpoint_id)))
    if endpoint is None:
        return show(_create(tenant, fields, {"uid": endpoint_id, **extra})), 201
    changes = wire.load(CREATE, {"description": "", "event_types": [], "metadata": {}, "rate_limit": None, **fields})
    _check(tenant, changes, extra.get("uid"), but=endpoint.id)
    return show(_apply(endpoint, {**changes, "uid": extra.get("uid"), "channels": extra.get("channels")}, extra)), 200


@blp.patch("/app/<app_id>/endpoint/<endpoint_id>")
def patch_endpoint(app_id: str, endpoint_id: str) -> dict[str, Any]:
    endpoint = endpoint_for(app_id, endpoint_id)
    fields, extra = _fields(wire.body())
    changes = wire.load(UPDATE, fields, partial=True)
    _check(g.tenant, changes, extra.get("uid"), but=endpoint.id)
    changes.update({name: extra[name] for name in ("uid", "channels") if name in extra})
    return show(_apply(endpoint, changes, extra))


@blp.delete("/app/<app_id>/endpoint/<endpoint_id>")
def delete_endpoint(app_id: str, endpoint_id: str) -> tuple[str, int]:
    actions.delete_endpoint(endpoint_for(app_id, endpoint_id))
    return "", 204


@blp.get("/app/<app_id>/endpoint/<endpoint_id>/secret")
def get_secret(app_id: str, endpoint_id: str) -> dict[str, Any]:
    return {"key": shared_secret(endpoint_for(app_id, endpoint_id).secret)}


@blp.post("/app/<app_id>/endpoint/<endpoint_id>/secret/rotate")
def rotate_secret(app_id: str, endpoint_id: str) -> dict[str, Any]:
    """A new secret (``key``, or generated); the old one signs too for ``gracePeriodSeconds`` (ours by default).
    The Svix server answers 204, SDK 2.x reads ``{key}``: 200 with it suits both."""
    endpoint = endpoint_for(app_id, endpoint_id)
    data = wire.body() if wire.has_body() else {}
    overlap = current_app.extensions["webhooks.settings"].secret_rotation_overlap
    grace = data.get("gracePeriodSeconds")
    if grace is not None:
        if not isinstance(grace, int) or isinstance(grace, bool) or not 0 <= grace <= MAX_GRACE:
            wire.invalid(["body", "gracePeriodSeconds"], f"must be an integer from 0 to {MAX_GRACE}")
        overlap = grace
    secret = _secret(data["key"]) if data.get("key") is not None else None
    return {"key": shared_secret(actions.rotate_secret(endpoint, overlap, "v1", secret).secret)}


@blp.post("/app/<app_id>/endpoint/<endpoint_id>/recover")
def recover(app_id: str, endpoint_id: str) -> tuple[dict[str, Any], int]:
    """Resend what failed since ``since`` (``actions.recover``); done before the answer, so the task is finished."""
    endpoint = endpoint_for(app_id, endpoint_id)
    data = wire.body()
    if data.get("until") is not None:
        wire.invalid(["body", "until"], "'until' is not supported by this service: everything since 'since' is recovered")
    since = wire.load(RECOVER, {"since": data.get("since")} if "since" in data else {})["since"]
    actions.recover(endpoint, since, requester=api_requester())
    return {"id": f"qtask_{uuid.uuid4().hex}", "status": "finished", "task": "endpoint.recover",
            "updatedAt": wire.timestamp(utcnow())}, 202
