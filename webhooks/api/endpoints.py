"""/v1/endpoints: register and manage webhook endpoints, their secret, history and recovery."""

from __future__ import annotations

from typing import Any

from flask import current_app, url_for
from flask.views import MethodView
from flask_smorest import abort

from webhooks import actions
from webhooks.storage import db
from webhooks.api.common import api_requester, attempt_page, current_tenant, cursor_page, get_owned
from webhooks.api.parsing import Blueprint
from webhooks.api.auth import require_tenant
from webhooks.storage.models import Attempt, Endpoint, HealthChange
from webhooks.health import probes, summary
from webhooks.health.presence import health_of
from webhooks.api.endpoint_schemas import (
    EndpointCreateSchema, EndpointHealthSchema, EndpointPageSchema, EndpointSchema, EndpointUpdateSchema, EndpointWithSecretSchema, ProbeResultSchema, RecoverResultSchema, RecoverSchema, SecretRotateSchema, SecretSchema,
)
from webhooks.api.schemas import AttemptListArgsSchema, AttemptPageSchema, EndpointListArgsSchema
from webhooks.delivery.signing import scheme_of

#: Health changes shown by ``GET /v1/endpoints/<id>/health``.
MAX_HEALTH_CHANGES = 100

#: Endpoint attributes the health view repeats.
HEALTH_FIELDS = (
    "consecutive_failures", "failing_since", "offline_since", "probe_due_at", "last_success_at", "parked_count",
    "oldest_parked_at",
)

#: ``disabled_reason`` of an endpoint a person disabled through the API.
DISABLED_BY_REQUEST = "disabled through the API"

#: The body of PATCH: every field optional.
ENDPOINT_UPDATE = EndpointUpdateSchema(partial=True)

blp = Blueprint("endpoints", __name__, url_prefix="/v1/endpoints", description="Webhook endpoints")
blp.before_request(require_tenant)


def with_parked_stats(endpoints: list[Endpoint]) -> list[Endpoint]:
    """``summary.with_parked_stats`` with this app's settings."""
    return summary.with_parked_stats(endpoints, current_app.extensions["webhooks.settings"])


def check_destinations(fields: dict[str, Any], endpoint: Endpoint | None = None) -> None:
    """``url`` and ``fallback_url`` as they are to be stored (a masked one sent back keeps its password), or
    422 naming each that may not be used (SSRF rules of ``netguard``, this service's own broker)."""
    problems = actions.check_destinations(fields, endpoint, current_app.extensions["webhooks.settings"])
    if problems:
        abort(422, errors={"json": {name: [problem] for name, problem in problems.items()}})


@blp.route("")
class Endpoints(MethodView):
    @blp.arguments(EndpointListArgsSchema, location="query")
    @blp.response(200, EndpointPageSchema)
    def get(self, args: dict[str, Any]) -> dict[str, Any]:
        """List endpoints, oldest first (cursor = the last endpoint id)."""
        query = Endpoint.select().where((Endpoint.tenant == current_tenant().id) & Endpoint.deleted_at.is_null())
        page = cursor_page(query, Endpoint.id, limit=args["limit"], after=args.get("cursor"))
        with_parked_stats(page["data"])
        return page

    @blp.arguments(EndpointCreateSchema)
    @blp.response(201, EndpointWithSecretSchema)
    @blp.alt_response(409, response="CONFLICT")
    def post(self, data: dict[str, Any]) -> tuple[Endpoint, dict[str, str]]:
        """Register an endpoint; the answer holds its `whsec_` secret (v1) or `whpk_` public key (v1a).

        A tenant has at most `MAX_ENDPOINTS_PER_TENANT` live endpoints (100 by default): one more is a 409.
        """
        check_destinations(data)
        scheme = data.pop("signature_scheme", "v1")
        try:
            endpoint = actions.create_endpoint(current_tenant().id, data, scheme=scheme, max_endpoints=current_app.extensions[
                "webhooks.settings"].max_endpoints_per_tenant)
        except actions.EndpointLimitReached as error:
            abort(409, message=str(error))
        with_parked_stats([endpoint])
        return endpoint, {"Location": url_for(".Endpoint", endpoint_id=endpoint.id)}


@blp.route("/<endpoint_id>", endpoint="Endpoint")
class EndpointItem(MethodView):
    @blp.response(200, EndpointSchema)
    def get(self, endpoint_id: str) -> Endpoint:
        """Show an endpoint with its health and what it has waiting."""
        return with_parked_stats([get_owned(Endpoint, endpoint_id)])[0]

    @blp.arguments(ENDPOINT_UPDATE)
    # The generated body schema, and "not both of disabled and status" (OpenAPI 3.0 ignores siblings of a $ref).
    @blp.doc(requestBody={"content": {"application/json": {"schema": {
        "allOf": [ENDPOINT_UPDATE], "not": {"required": ["disabled", "status"]}}}}})
    @blp.response(200, EndpointSchema)
    def patch(self, changes: dict[str, Any], endpoint_id: str) -> Endpoint:
        """Change an endpoint; enabling it (`disabled: false` or `status: enabled`) releases what it parked.

        `disabled` and `status` say the same thing: send one of them, not both (422). A `url` or
        `fallback_url` sent back as shown, its password `***`, keeps the password stored.
        `fallback_url: null` removes the fallback.
        """
        endpoint = get_owned(Endpoint, endpoint_id)
        check_destinations(changes, endpoint)
        disabled = changes.pop("disabled", None)
        status = changes.pop("status", None)
        if status is not None:
            if disabled is not None:
                abort(422, errors={"json": {"status": ["send 'status' or 'disabled', not both"]}})
            disabled = status == "disabled"
        with db.write():
            actions.update_endpoint(endpoint, changes)
            if disabled is not None and disabled != endpoint.disabled:
                actions.set_endpoint_disabled(endpoint, disabled, DISABLED_BY_REQUEST if disabled else None)
        return with_parked_stats([Endpoint.get_by_id(endpoint.id)])[0]

    @blp.response(204)
    def delete(self, endpoint_id: str) -> None:
        """Delete an endpoint: its unfinished deliveries are cancelled, its attempts kept."""
        actions.delete_endpoint(get_owned(Endpoint, endpoint_id))


@blp.route("/<endpoint_id>/health")
class EndpointHealth(MethodView):
    @blp.response(200, EndpointHealthSchema)
    def get(self, endpoint_id: str) -> dict[str, Any]:
        """The endpoint's health now, and each change of state with its time and reason."""
        endpoint = with_parked_stats([get_owned(Endpoint, endpoint_id)])[0]
        changes = HealthChange.select().where(HealthChange.endpoint == endpoint.id).order_by(HealthChange.id.desc())
        return {
            "health": health_of(endpoint),
            **{name: getattr(endpoint, name) for name in HEALTH_FIELDS},
            "changes": list(changes.limit(MAX_HEALTH_CHANGES)),
        }


@blp.route("/<endpoint_id>/secret")
class EndpointSecret(MethodView):
    @blp.response(200, SecretSchema)
    def get(self, endpoint_id: str) -> Endpoint:
        """What verifies the endpoint's signatures now: its `whsec_` secret (v1) or `whpk_` public key (v1a)."""
        return get_owned(Endpoint, endpoint_id)


@blp.route("/<endpoint_id>/secret/rotate")
class EndpointSecretRotation(MethodView):
    @blp.arguments(SecretRotateSchema, required=False)
    @blp.response(200, SecretSchema)
    @blp.alt_response(409, response="CONFLICT")
    def post(self, data: dict[str, Any], endpoint_id: str) -> Endpoint:
        """Replace the signing key; the old one still signs for `SECRET_ROTATION_OVERLAP`.

        v1: a `whsec_` given as `secret`, or a generated one. v1a: a new key pair (a `secret` is a 409).
        `scheme` switches an endpoint between v1 and v1a with the same overlap.
        """
        endpoint = get_owned(Endpoint, endpoint_id)
        scheme = data.get("scheme") or scheme_of(endpoint.secret)
        if scheme == "v1a" and "secret" in data:
            # 409: a valid body that conflicts with the endpoint's scheme (or the one asked for).
            abort(409, message="a v1a key pair is generated by the service: send no secret")
        overlap = current_app.extensions["webhooks.settings"].secret_rotation_overlap
        return actions.rotate_secret(endpoint, overlap, scheme, data.get("secret"))


@blp.route("/<endpoint_id>/recover")
class EndpointRecovery(MethodView):
    @blp.arguments(RecoverSchema)
    @blp.response(202, RecoverResultSchema)
    @blp.alt_response(503, response="SERVICE_UNAVAILABLE")
    def post(self, data: dict[str, Any], endpoint_id: str) -> dict[str, int]:
        """Resend every failed delivery of the endpoint created since `since`; parked ones stay parked.

        Failed deliveries get one fresh attempt each, now, outside the retry ladder (a failed
        one stays failed if it fails again). Parked deliveries (the endpoint is offline or
        disabled) are not sent: they are released one at a time, in creation order and with
        the attempts they have left, as soon as the endpoint is reachable again. If the
        endpoint is online with deliveries still parked, their release starts now.
        """
        result = actions.recover(get_owned(Endpoint, endpoint_id), data["since"], requester=api_requester())
        return {"queued": result.queued, "parked": result.parked}


@blp.route("/<endpoint_id>/probe")
class EndpointProbe(MethodView):
    @blp.response(202, ProbeResultSchema)
    @blp.alt_response(409, response="CONFLICT")
    @blp.alt_response(503, response="SERVICE_UNAVAILABLE")
    def post(self, endpoint_id: str) -> dict[str, Any]:
        """Try now: probe an offline endpoint at once ("I'm back"); on success what it missed is released.

        While an endpoint is offline the service probes it by itself, soon after it went
        offline and then at an interval that grows with the outage up to a few minutes
        (`PROBE_INTERVAL`; `next_probe_at` on the endpoint says when). This probes it now,
        with its oldest undelivered delivery, outside the retry ladder. If the endpoint
        answers 2xx that delivery is delivered, the endpoint is `recovering` and the rest of
        what it missed follows in order, paced; if not, it stays parked with every attempt it
        had, and the probes go on. The answer comes before the probe is made: watch the
        endpoint's `health`, or the delivery. 409 if the endpoint is not offline (online,
        recovering, or disabled: enable it instead) or owes no delivery to probe with.
        """
        endpoint = get_owned(Endpoint, endpoint_id)
        interval = current_app.extensions["webhooks.settings"].probe_interval
        try:
            message = actions.probe_now(endpoint, interval, requester=api_requester())
        except probes.NotProbed as error:
            abort(409, message=str(error))
        return {"endpoint_id": endpoint.id, "delivery_id": message.delivery_id, "attempt_no": message.attempt}


@blp.route("/<endpoint_id>/attempts")
class EndpointAttempts(MethodView):
    @blp.arguments(AttemptListArgsSchema, location="query")
    @blp.response(200, AttemptPageSchema)
    def get(self, args: dict[str, Any], endpoint_id: str) -> dict[str, Any]:
        """The endpoint's attempts, newest first.

        A deleted endpoint is a 404 here like everywhere; its attempts stay readable per event and per delivery.
        """
        endpoint = get_owned(Endpoint, endpoint_id)
        return attempt_page(Attempt.endpoint == endpoint.id, args)
