"""/v1/endpoints: register and manage webhook endpoints, their secret, history and recovery."""

from __future__ import annotations

from typing import Any

from flask import current_app, url_for
from flask.views import MethodView
from flask_smorest import abort

from webhooks import actions, db, netguard
from webhooks.api.common import attempt_page, current_tenant, cursor_page, get_owned
from webhooks.api.parsing import Blueprint
from webhooks.auth import require_tenant
from webhooks.ids import new_id
from webhooks.models import Attempt, Endpoint
from webhooks.schemas import (
    AttemptPageSchema,
    CursorArgsSchema,
    EndpointCreateSchema,
    EndpointPageSchema,
    EndpointSchema,
    EndpointUpdateSchema,
    EndpointWithSecretSchema,
    RecoverResultSchema,
    RecoverSchema,
    SecretRotateSchema,
    SecretSchema,
)
from webhooks.signing import generate_secret
from webhooks.timeutil import seconds, utcnow

#: ``disabled_reason`` of an endpoint a person disabled through the API.
DISABLED_BY_REQUEST = "disabled through the API"

blp = Blueprint("endpoints", __name__, url_prefix="/v1/endpoints", description="Webhook endpoints")
blp.before_request(require_tenant)


def check_target(url: str) -> None:
    """Abort 422 (on ``url``) when the URL may not be called: SSRF rules of ``netguard``."""
    settings = current_app.extensions["webhooks.settings"]
    policy = netguard.TargetPolicy.from_strings(settings.allow_private_targets, settings.allowed_target_networks)
    try:
        netguard.check_url(url, policy)
    except (netguard.BlockedAddress, ValueError) as error:  # UnresolvableHost is a BlockedAddress
        abort(422, errors={"json": {"url": [str(error)]}})


@blp.route("")
class Endpoints(MethodView):
    @blp.arguments(CursorArgsSchema, location="query")
    @blp.response(200, EndpointPageSchema)
    def get(self, args: dict[str, Any]) -> dict[str, Any]:
        """List endpoints, oldest first (cursor = the last endpoint id)."""
        query = Endpoint.select().where((Endpoint.tenant == current_tenant().id) & Endpoint.deleted_at.is_null())
        return cursor_page(query, Endpoint.id, limit=args["limit"], after=args.get("cursor"))

    @blp.arguments(EndpointCreateSchema)
    @blp.response(201, EndpointWithSecretSchema)
    def post(self, data: dict[str, Any]) -> tuple[Endpoint, dict[str, str]]:
        """Register an endpoint; the answer holds its signing secret."""
        check_target(data["url"])
        now = utcnow()
        with db.write():
            endpoint = Endpoint.create(
                id=new_id("ep"),
                tenant=current_tenant().id,
                secret=generate_secret(),
                created_at=now,
                updated_at=now,
                **data,
            )
        return endpoint, {"Location": url_for("endpoints.Endpoint", endpoint_id=endpoint.id)}


@blp.route("/<endpoint_id>", endpoint="Endpoint")
class EndpointItem(MethodView):
    @blp.response(200, EndpointSchema)
    def get(self, endpoint_id: str) -> Endpoint:
        """Show an endpoint."""
        return get_owned(Endpoint, endpoint_id)

    @blp.arguments(EndpointUpdateSchema(partial=True))
    @blp.response(200, EndpointSchema)
    def patch(self, changes: dict[str, Any], endpoint_id: str) -> Endpoint:
        """Change an endpoint; `disabled: false` also releases the deliveries it parked."""
        endpoint = get_owned(Endpoint, endpoint_id)
        if "url" in changes and changes["url"] != endpoint.url:
            check_target(changes["url"])
        disabled = changes.pop("disabled", None)
        with db.write():
            if changes:
                Endpoint.update(**changes, updated_at=utcnow()).where(Endpoint.id == endpoint.id).execute()
            if disabled is not None and disabled != endpoint.disabled:
                actions.set_endpoint_disabled(endpoint, disabled, DISABLED_BY_REQUEST if disabled else None)
        return Endpoint.get_by_id(endpoint.id)

    @blp.response(204)
    def delete(self, endpoint_id: str) -> None:
        """Delete an endpoint: its unfinished deliveries are cancelled, its attempts kept."""
        actions.delete_endpoint(get_owned(Endpoint, endpoint_id))


@blp.route("/<endpoint_id>/secret")
class EndpointSecret(MethodView):
    @blp.response(200, SecretSchema)
    def get(self, endpoint_id: str) -> dict[str, str]:
        """Show the endpoint's current signing secret."""
        return {"secret": get_owned(Endpoint, endpoint_id).secret}


@blp.route("/<endpoint_id>/secret/rotate")
class EndpointSecretRotation(MethodView):
    @blp.arguments(SecretRotateSchema, required=False)
    @blp.response(200, SecretSchema)
    def post(self, data: dict[str, Any], endpoint_id: str) -> dict[str, str]:
        """Replace the secret; the old one still signs for `SECRET_ROTATION_OVERLAP`."""
        endpoint = get_owned(Endpoint, endpoint_id)
        overlap = current_app.extensions["webhooks.settings"].secret_rotation_overlap
        secret = data.get("secret") or generate_secret()
        now = utcnow()
        with db.write():
            (
                # previous_secret = the secret column as it was: concurrent rotations cannot lose one.
                Endpoint.update(
                    previous_secret=Endpoint.secret,
                    previous_secret_until=now + seconds(overlap),
                    secret=secret,
                    updated_at=now,
                )
                .where(Endpoint.id == endpoint.id)
                .execute()
            )
        return {"secret": secret}


@blp.route("/<endpoint_id>/recover")
class EndpointRecovery(MethodView):
    @blp.arguments(RecoverSchema)
    @blp.response(202, RecoverResultSchema)
    @blp.alt_response(503, response="SERVICE_UNAVAILABLE")
    def post(self, data: dict[str, Any], endpoint_id: str) -> dict[str, int]:
        """Resend every failed or parked delivery of the endpoint created since `since`."""
        return {"queued": actions.recover(get_owned(Endpoint, endpoint_id), data["since"])}


@blp.route("/<endpoint_id>/attempts")
class EndpointAttempts(MethodView):
    @blp.arguments(CursorArgsSchema, location="query")
    @blp.response(200, AttemptPageSchema)
    def get(self, args: dict[str, Any], endpoint_id: str) -> dict[str, Any]:
        """The endpoint's attempts, newest first (also after it was deleted)."""
        endpoint = get_owned(Endpoint, endpoint_id, include_deleted=True)
        return attempt_page(Attempt.endpoint == endpoint.id, args)
