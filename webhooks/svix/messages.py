"""Svix messages are our events: send one (202, through ``webhooks.ingest.accept`` with its idempotency),
list and read them. ``{msg_id}`` is our event id or the message's ``eventId``, which is the event's
idempotency key (so it is found while the key is kept, ``IDEMPOTENCY_TTL``)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, g, request

from webhooks.api.schemas import EventCreateSchema
from webhooks.catalog.registry import EventsRejected
from webhooks.ingest import accept as ingest
from webhooks.ingest import auth_keys
from webhooks.storage.models import Event, IdempotencyKey, Tenant
from webhooks.svix import apps, wire

#: The prefix of the idempotency keys the Svix SDKs make up for a POST without one: not an ``eventId``.
AUTO_KEY = "auto_"

#: Svix message features we lack: a non-empty value is a 422 naming it.
UNSUPPORTED = {"channels": "channels are not supported by this service",
               "deliverAt": "scheduled delivery (deliverAt) is not supported by this service",
               "transformationsParams": "transformations are not supported by this service"}

CREATE = EventCreateSchema()

blp = Blueprint("svix_messages", __name__)


def event_id_of(event: Event) -> str | None:
    """The message's ``eventId``: the idempotency key it was sent with, unless an SDK made that key up."""
    row = (IdempotencyKey.select(IdempotencyKey.key).where(IdempotencyKey.event == event.id)
           .order_by(IdempotencyKey.created_at).first())
    return row.key if row is not None and not row.key.startswith(AUTO_KEY) else None


def show(event: Event, *, with_content: bool = True, event_id: str | None = None) -> dict[str, Any]:
    """An event as a Svix ``MessageOut`` (``payload`` empty without content, as the Svix server does)."""
    return {"id": event.id, "eventId": event_id if event_id is not None else event_id_of(event),
            "eventType": event.event_type, "payload": event.payload if with_content else {}, "channels": None,
            "tags": None, "timestamp": wire.timestamp(event.created_at)}


def with_content() -> bool:
    return request.args.get("with_content", "true").lower() != "false"


def message_for(tenant: Tenant, ref: str) -> Event:
    """The tenant's event with this id, or whose idempotency key (``eventId``) is ``ref``; else 404."""
    event = Event.get_or_none((Event.id == ref) & (Event.tenant == tenant.id))
    if event is None:
        key = IdempotencyKey.get_or_none((IdempotencyKey.tenant == tenant.id) & (IdempotencyKey.key == ref))
        event = Event.get_or_none(Event.id == key.event_id) if key is not None else None
    if event is None:
        wire.fail(404, "message not found")
    return event


def _tenant_or_created(app_id: str, data: dict[str, Any]) -> Tenant:
    """The application; with an ``application`` in the body, created when it does not exist (as the Svix API does)."""
    tenant = auth_keys.tenant_by_ref(app_id)
    if tenant is None and isinstance(data.get("application"), dict):
        tenant = apps.create_from({"uid": app_id, **data["application"]})
    g.tenant = tenant or apps.app_for(app_id)
    return g.tenant


@blp.post("/app/<app_id>/msg")
def create_message(app_id: str) -> tuple[dict[str, Any], int]:
    """Send a message: 202 with it; the same ``eventId`` (or ``idempotency-key``) again answers the first."""
    data = wire.body()
    for name, why in UNSUPPORTED.items():
        if data.get(name):
            wire.invalid(["body", name], why)
    tenant = _tenant_or_created(app_id, data)
    key = data.get("eventId") or request.headers.get("idempotency-key")
    fields = {"event_type": data.get("eventType"), "payload": data.get("payload")}
    checked = wire.load(CREATE, {**{k: v for k, v in fields.items() if v is not None},
                                 **({"idempotency_key": key} if key else {})})
    try:
        accepted = ingest.accept_event(tenant, checked["event_type"], checked["payload"], key)
    except ingest.IdempotencyConflict as error:
        wire.fail(409, str(error))
    except (ingest.BatchOverRateLimit, ingest.ReservedEventType) as error:
        wire.invalid(["body", "eventType"], str(error))
    except EventsRejected as error:
        raise wire.SvixError(422, wire.validation_detail(error.problems[0])) from None
    event_id = data.get("eventId") or (key if key and not key.startswith(AUTO_KEY) else None)
    return show(accepted.event, with_content=with_content(), event_id=event_id), 202


@blp.get("/app/<app_id>/msg")
def list_messages(app_id: str) -> dict[str, Any]:
    """The application's messages, newest first; ``event_types`` narrows them."""
    tenant = apps.app_for(app_id)
    query = Event.select().where((Event.tenant == tenant.id) & (Event.test == False))  # noqa: E712 - SQL
    types = request.args.getlist("event_types")
    if types:
        query = query.where(Event.event_type.in_(types))
    content = with_content()
    return wire.page(query, Event.id, lambda event: show(event, with_content=content), newest_first=True)


@blp.get("/app/<app_id>/msg/<msg_id>")
def get_message(app_id: str, msg_id: str) -> dict[str, Any]:
    return show(message_for(apps.app_for(app_id), msg_id), with_content=with_content())
