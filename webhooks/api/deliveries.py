"""/v1/deliveries: one event to one endpoint, its attempts, and resending it now; the list of them (failed ones)."""

from __future__ import annotations

from typing import Any

from flask.views import MethodView
from flask_smorest import abort

from webhooks import actions
from webhooks.api.common import api_requester, attempt_page, current_tenant, cursor_page, get_owned, recent_attempts
from webhooks.api.parsing import Blueprint
from webhooks.api.auth import require_tenant
from webhooks.storage.models import Attempt, Delivery
from webhooks.api.schemas import (
    AttemptListArgsSchema, AttemptPageSchema, DeliveryDetailSchema, DeliveryListArgsSchema, DeliveryPageSchema, DeliverySchema,
)

blp = Blueprint("deliveries", __name__, url_prefix="/v1/deliveries", description="Deliveries and resends")
blp.before_request(require_tenant)


@blp.route("")
class Deliveries(MethodView):
    @blp.arguments(DeliveryListArgsSchema, location="query")
    @blp.response(200, DeliveryPageSchema)
    def get(self, args: dict[str, Any]) -> dict[str, Any]:
        """List deliveries, newest first: `?status=failed` is what exhausted its retries.

        Narrow with `status`, `endpoint_id` and `since` (created at or after); page with
        `cursor` (the `next_cursor` of the previous page) and `limit`. A failed delivery
        gets a fresh attempt with `POST /v1/deliveries/{delivery_id}/resend`, every failed
        delivery of an endpoint since a time with `POST /v1/endpoints/{endpoint_id}/recover`.
        """
        condition = Delivery.tenant == current_tenant().id
        if "status" in args:
            condition &= Delivery.status == args["status"]
        if "endpoint_id" in args:
            condition &= Delivery.endpoint == args["endpoint_id"]
        if "since" in args:
            condition &= Delivery.created_at >= args["since"]
        return cursor_page(Delivery.select().where(condition), Delivery.id, limit=args["limit"],
                           after=args.get("cursor"), newest_first=True)


@blp.route("/<delivery_id>")
class DeliveryItem(MethodView):
    @blp.response(200, DeliveryDetailSchema)
    def get(self, delivery_id: str) -> Delivery:
        """Show a delivery with its most recent attempts (newest first)."""
        delivery = get_owned(Delivery, delivery_id)
        delivery.recent_attempts = recent_attempts(delivery)  # type: ignore[attr-defined]
        return delivery


@blp.route("/<delivery_id>/attempts")
class DeliveryAttempts(MethodView):
    @blp.arguments(AttemptListArgsSchema, location="query")
    @blp.response(200, AttemptPageSchema)
    def get(self, args: dict[str, Any], delivery_id: str) -> dict[str, Any]:
        """Every attempt of the delivery, newest first."""
        return attempt_page(Attempt.delivery == get_owned(Delivery, delivery_id).id, args)


@blp.route("/<delivery_id>/resend")
class DeliveryResend(MethodView):
    @blp.response(202, DeliverySchema)
    @blp.alt_response(409, response="CONFLICT")
    @blp.alt_response(503, response="SERVICE_UNAVAILABLE")
    def post(self, delivery_id: str) -> Delivery:
        """Queue a fresh attempt now, outside the retry ladder.

        A delivery that is still retrying keeps its place on the ladder: if this attempt
        fails, its next scheduled attempt stays due when it was, and the tiers after it
        are the ones it would have had. A finished delivery (delivered or failed) gets
        exactly one attempt; a failed one stays failed if it fails again. A parked delivery
        that fails again stays parked, in its place for the in-order release.
        """
        delivery = get_owned(Delivery, delivery_id)
        try:
            return actions.resend(delivery, requester=api_requester())
        except ValueError as error:  # e.g. cancelled: its endpoint was deleted
            abort(409, message=str(error))
