"""Svix message attempts are our attempts: list them by endpoint or by message, read one, and resend a
message to an endpoint (``webhooks.actions.resend`` of that delivery)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, g, request

from webhooks import actions
from webhooks.api.common import api_requester
from webhooks.storage.models import Attempt, Delivery, Endpoint
from webhooks.storage.statuses import DeliveryStatus
from webhooks.svix import apps, wire
from webhooks.svix.endpoints import endpoint_for
from webhooks.svix.messages import message_for

#: An attempt's Svix ``status`` and ``statusText`` by the outcome it left its delivery in (failed otherwise).
STATUSES = {DeliveryStatus.DELIVERED: (0, "success"), DeliveryStatus.CANCELLED: (4, "canceled")}
FAILED = (2, "fail")

#: Our triggers a person asked for (Svix ``triggerType`` 1, manual); the ladder's are 0, scheduled.
MANUAL_TRIGGERS = ("resend", "recover", "probe")

blp = Blueprint("svix_attempts", __name__)


def show(attempt: Attempt) -> dict[str, Any]:
    """An attempt as a Svix ``MessageAttemptOut`` (``responseStatusCode`` 0 when no answer came)."""
    status, text = STATUSES.get(attempt.outcome, FAILED)
    return {"id": attempt.id, "msgId": attempt.event_id, "endpointId": attempt.endpoint_id, "url": attempt.url,
            "response": attempt.response_body if attempt.response_body is not None else (attempt.error or ""),
            "responseStatusCode": attempt.response_status or 0,
            "responseDurationMs": int(round(attempt.duration_ms)), "status": status, "statusText": text,
            "triggerType": 1 if attempt.trigger in MANUAL_TRIGGERS else 0,
            "timestamp": wire.timestamp(attempt.started_at)}


def _page(condition: Any) -> dict[str, Any]:
    """The attempts matching ``condition``, newest first (ids sort by time)."""
    status = request.args.get("status")
    query = Attempt.select().where(condition)
    if status is not None:
        wanted = [outcome for outcome, (code, _) in STATUSES.items() if str(code) == status]
        query = query.where(Attempt.outcome.in_(wanted) if wanted or status != "2"
                            else Attempt.outcome.not_in(list(STATUSES)))
    return wire.page(query, Attempt.id, show, newest_first=True)


@blp.get("/app/<app_id>/attempt/endpoint/<endpoint_id>")
def by_endpoint(app_id: str, endpoint_id: str) -> dict[str, Any]:
    return _page(Attempt.endpoint == endpoint_for(app_id, endpoint_id).id)


@blp.get("/app/<app_id>/attempt/msg/<msg_id>")
def by_message(app_id: str, msg_id: str) -> dict[str, Any]:
    """The message's attempts, at every endpoint or (``endpoint_id``) one."""
    event = message_for(apps.app_for(app_id), msg_id)
    condition = Attempt.event == event.id
    if request.args.get("endpoint_id"):
        condition &= Attempt.endpoint == endpoint_for(app_id, request.args["endpoint_id"]).id
    return _page(condition)


@blp.get("/app/<app_id>/msg/<msg_id>/attempt/<attempt_id>")
def get_attempt(app_id: str, msg_id: str, attempt_id: str) -> dict[str, Any]:
    event = message_for(apps.app_for(app_id), msg_id)
    attempt = Attempt.get_or_none((Attempt.id == attempt_id) & (Attempt.event == event.id))
    if attempt is None:
        wire.fail(404, "attempt not found")
    return show(attempt)


@blp.post("/app/<app_id>/msg/<msg_id>/endpoint/<endpoint_id>/resend")
def resend(app_id: str, msg_id: str, endpoint_id: str) -> tuple[dict[str, Any], int]:
    """A fresh attempt of the message at the endpoint now, outside the ladder (``actions.resend``)."""
    endpoint: Endpoint = endpoint_for(app_id, endpoint_id)
    event = message_for(g.tenant, msg_id)
    delivery = Delivery.get_or_none((Delivery.event == event.id) & (Delivery.endpoint == endpoint.id) & ~Delivery.fallback)
    if delivery is None:
        wire.fail(404, "the message was not sent to this endpoint (it did not subscribe to its type)")
    try:
        actions.resend(delivery, requester=api_requester())
    except ValueError as error:  # cancelled: its endpoint was deleted
        wire.fail(409, str(error))
    return {}, 202
