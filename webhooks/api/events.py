"""/v1/events: accept events (202, idempotent), one or a batch; the catch-up feed by ``seq``; history."""

from __future__ import annotations

from typing import Any

from flask import current_app, jsonify, request, url_for
from flask.views import MethodView
from flask_smorest import abort

from webhooks.catalog.registry import EventsRejected
from webhooks.ingest import accept as ingest
from webhooks.storage import retention
from webhooks.ingest.accept import MAX_BATCH, NewEvent
from webhooks.api.costs import record_deliveries
from webhooks.api.common import attempt_page, current_tenant, cursor_page, get_owned
from webhooks.api.parsing import Blueprint
from webhooks.api.auth import require_tenant
from webhooks.storage.models import Attempt, Delivery, Event
from webhooks.storage.timeutil import isoformat
from webhooks.api.schemas import (
    AttemptListArgsSchema, AttemptPageSchema, EventBatchSchema, EventCreateSchema, EventDetailSchema, EventListArgsSchema, EventPageSchema, EventSchema, IdempotencyHeaderSchema,
)

#: Response header set when an idempotency key was seen before (nothing new was created).
REPLAYED_HEADER = "Idempotent-Replayed"

#: Schema instances, not classes: webargs would build a new schema for every request
#: (``webhooks.api.fast_ingest`` loads with the same ones).
EVENT_CREATE = EventCreateSchema()
EVENT_CREATE_MANY = EventCreateSchema(many=True)
IDEMPOTENCY_HEADER = IdempotencyHeaderSchema()

blp = Blueprint("events", __name__, url_prefix="/v1/events", description="Events and their delivery history")
blp.before_request(require_tenant)


def _deliveries_in_order() -> Any:
    return Delivery.select().order_by(Delivery.id)


def _with_deliveries(event: Event, deliveries: list[Delivery]) -> Event:
    # Assigned the way peewee's prefetch() does, so every event view reads ``event.deliveries``.
    event.deliveries = deliveries  # type: ignore[attr-defined]
    return event


def accepted_body(event: Event, deliveries: list[Delivery]) -> dict[str, Any]:
    """``EventSchema().dump`` of an accepted event, built directly (the hot path of ingestion).

    tests/test_ingest_fast_path.py holds it to the schema, which still documents the answer.
    """
    return {
        "id": event.id,
        "seq": event.seq,
        "event_type": event.event_type,
        "payload": event.payload,
        "created_at": isoformat(event.created_at),
        "test": bool(event.test),
        "deliveries": [{"id": d.id, "endpoint_id": d.endpoint_id, "status": d.status, "fallback": d.fallback}
                       for d in deliveries],
    }


def batch_body(accepted: list[ingest.Accepted]) -> dict[str, Any]:
    """``EventBatchSchema().dump`` of a batch's answer, built directly like ``accepted_body``."""
    return {"data": [
        {
            "id": a.event.id,
            "seq": a.event.seq,
            "event_type": a.event.event_type,
            "created_at": isoformat(a.event.created_at),
            "deliveries": [{"id": d.id, "endpoint_id": d.endpoint_id, "status": d.status, "fallback": d.fallback}
                           for d in a.deliveries],
            "replayed": a.replayed,
        }
        for a in accepted
    ]}


def _rejected_message(event_type: str, problems: dict[str, Any]) -> str:
    if "payload" in problems:
        return f"the payload does not match the schema of event type {event_type!r}: see errors.json.payload"
    return f"event type {event_type!r} may not be posted: see errors.json.event_type"


def _idempotency_key(header: str | None, field: str | None) -> str | None:
    """The request's key, from the header or the body; abort 409 when both are given and differ.

    409, not 422: each is valid on its own (the document cannot say "equal if both"); together they
    are two conflicting requests, like one key reused with another body.
    """
    if header is not None and field is not None and header != field:
        abort(409, message="the Idempotency-Key header and the body's idempotency_key differ: send the key once "
                           "(or the same in both)")
    return header if header is not None else field


@blp.route("")
class Events(MethodView):
    @blp.arguments(IDEMPOTENCY_HEADER, location="headers")
    @blp.arguments(EVENT_CREATE)
    @blp.response(202, EventSchema, headers={REPLAYED_HEADER: {"schema": {"type": "string", "enum": ["true"]}}})
    @blp.alt_response(409, response="CONFLICT")
    @blp.alt_response(429, response="TOO_MANY_REQUESTS")
    def post(self, headers: dict[str, Any], data: dict[str, Any]) -> tuple[Event, int, dict[str, str]]:
        """Accept an event for delivery to every subscribed endpoint.

        The idempotency key goes in the `Idempotency-Key` header or the body's `idempotency_key`
        (both: they must be equal, else 409). The same key again (within 24 h) answers with the
        first event and creates nothing; with a different body it is a 409.
        """
        key = _idempotency_key(headers.get("idempotency_key"), data.get("idempotency_key"))
        try:
            accepted = ingest.accept_event(current_tenant(), data["event_type"], data["payload"], key)
            record_deliveries(request.environ, [accepted])
        except ingest.IdempotencyConflict as error:
            abort(409, message=str(error))
        except ingest.BatchOverRateLimit as error:
            abort(422, message=str(error))
        except EventsRejected as error:
            abort(422, message=_rejected_message(data["event_type"], error.problems[0]),
                  errors={"json": error.problems[0]})
        response_headers = {"Location": url_for(".Event", event_id=accepted.event.id)}
        if accepted.replayed:
            response_headers[REPLAYED_HEADER] = "true"
        return jsonify(accepted_body(accepted.event, accepted.deliveries)), 202, response_headers

    @blp.arguments(EventListArgsSchema, location="query")
    @blp.response(200, EventPageSchema)
    @blp.alt_response(410, response="GONE")
    def get(self, args: dict[str, Any]) -> dict[str, Any]:
        """Events after the `seq` cursor, oldest first: how an offline client catches up.

        A cursor that fell behind the retention period (`RETENTION_DAYS`), with events after
        it purged, gets a 410 whose message names the `after` to continue from, never a page
        with a silent gap. `after=0` (from the start) is never refused: it reads what is kept.
        """
        tenant_id = current_tenant().id
        query = Event.select().where(Event.tenant == tenant_id)
        if "event_type" in args:
            query = query.where(Event.event_type == args["event_type"])
        if not args["include_test"]:
            query = query.where(Event.test == False)  # noqa: E712 - SQL, not Python
        page = cursor_page(
            query, Event.seq, limit=args["limit"], after=args["after"], feed=True, prefetch=(_deliveries_in_order(),)
        )
        # After the page: a purge that committed while it was read shows here (see stale_cursor).
        stale = retention.stale_cursor(tenant_id, args["after"])
        if stale is not None:
            days = current_app.extensions["webhooks.settings"].retention_days
            abort(410, message=stale.message(days))
        return page


@blp.route("/batch")
class EventBatch(MethodView):
    @blp.arguments(EVENT_CREATE_MANY, description=f"1 to {MAX_BATCH} events, within the body size limit.")
    # The generated array schema with its bounds (webargs loads the list; the view checks its length).
    @blp.doc(requestBody={"content": {"application/json": {"schema": {
        "type": "array", "items": EventCreateSchema, "minItems": 1, "maxItems": MAX_BATCH}}}})
    @blp.response(202, EventBatchSchema)
    @blp.alt_response(409, response="CONFLICT")
    @blp.alt_response(429, response="TOO_MANY_REQUESTS")
    def post(self, items: list[dict[str, Any]]) -> tuple[Any, int]:
        """Accept several events at once: all of them, or (on any error) none.

        They are stored in one transaction in list order (their `seq` follows the list) and
        delivered like single events. An item that fails validation is a 422 naming its index
        and field. Each item may carry its own `idempotency_key`: an item whose key was seen
        (within 24 h, or earlier in the same batch) answers with that event, `replayed: true`,
        and creates nothing; the same key with a different body is a 409 naming the index.
        The answer lists the events in request order. The rate limit counts events, or the
        deliveries they make when more.
        """
        if not 1 <= len(items) <= MAX_BATCH:
            abort(422, errors={"json": {"_schema": [f"a batch holds 1 to {MAX_BATCH} events, not {len(items)}"]}})
        if "Idempotency-Key" in request.headers:
            abort(422, errors={"headers": {"Idempotency-Key": [
                "not taken by a batch: give each event its own idempotency_key"]}})
        batch = [NewEvent(item["event_type"], item["payload"], item.get("idempotency_key")) for item in items]
        try:
            accepted = ingest.accept_events(current_tenant(), batch)
            record_deliveries(request.environ, accepted)
        except ingest.IdempotencyConflict as error:
            abort(409, message=f"item {error.indexes[0]}: {error}", errors={"json": {
                str(index): {"idempotency_key": ["already used with a different request"]}
                for index in error.indexes}})
        except ingest.BatchOverRateLimit as error:
            abort(422, errors={"json": {"_schema": [str(error)]}})
        except EventsRejected as error:
            abort(422, message=str(error), errors={"json": {str(i): found for i, found in error.problems.items()}})
        return jsonify(batch_body(accepted)), 202


@blp.route("/<event_id:event_id>", endpoint="Event")
class EventItem(MethodView):
    @blp.response(200, EventDetailSchema)
    def get(self, event_id: str) -> Event:
        """Show an event and what happened to each of its deliveries."""
        event = get_owned(Event, event_id)
        return _with_deliveries(event, list(_deliveries_in_order().where(Delivery.event == event.id)))


@blp.route("/<event_id:event_id>/attempts")
class EventAttempts(MethodView):
    @blp.arguments(AttemptListArgsSchema, location="query")
    @blp.response(200, AttemptPageSchema)
    def get(self, args: dict[str, Any], event_id: str) -> dict[str, Any]:
        """Every attempt to deliver the event (all endpoints), newest first."""
        return attempt_page(Attempt.event == get_owned(Event, event_id).id, args)
