"""Trying an endpoint out: ``POST /v1/endpoints/<id>/filter/test`` and ``POST /v1/endpoints/<id>/send-example``."""

from __future__ import annotations

from typing import Any

from flask import jsonify, request, url_for
from flask.views import MethodView
from flask_smorest import abort
from marshmallow import Schema, fields, validate

from webhooks.api.auth import require_tenant
from webhooks.api.common import current_tenant, get_owned
from webhooks.api.costs import record_deliveries
from webhooks.api.events import accepted_body
from webhooks.api.fields import EVENT_TYPE, FilterField
from webhooks.api.parsing import Blueprint
from webhooks.api.schemas import EventSchema
from webhooks.catalog import examples
from webhooks.ingest import accept as ingest
from webhooks.catalog.registry import EventsRejected
from webhooks.catalog.spec import MAX_EXAMPLES
from webhooks.storage.models import Endpoint

blp = Blueprint("endpoint_tryouts", __name__, url_prefix="/v1/endpoints",
                description="Trying an endpoint out: its filter, and a test event")
blp.before_request(require_tenant)


class FilterTestSchema(Schema):
    filter = FilterField("The filter to test; absent: the endpoint's own.")
    event_type = fields.String(required=True, validate=EVENT_TYPE)
    payload = fields.Dict(required=True, metadata={"description": "The event's payload (its `data`)."})


class FilterVerdictSchema(Schema):
    matches = fields.Boolean(metadata={"description": "The filter matches the event (no filter: true)."})
    failed = fields.String(allow_none=True, metadata={"description": "When it does not: the condition that failed "
                                                                     "and the value it saw."})
    subscribed = fields.Boolean(metadata={"description": "The endpoint's `event_types` take this type: with "
                                                         "`matches`, the event would be delivered to it."})


class SendExampleSchema(Schema):
    event_type = fields.String(required=True, validate=EVENT_TYPE)
    example = fields.Integer(load_default=0, validate=validate.Range(0, MAX_EXAMPLES - 1),
                             metadata={"description": "Which of the type's examples (0: the first)."})


@blp.route("/<endpoint_id>/filter/test")
class FilterTest(MethodView):
    @blp.arguments(FilterTestSchema)
    @blp.response(200, FilterVerdictSchema)
    def post(self, data: dict[str, Any], endpoint_id: str) -> examples.FilterVerdict:
        """Would this event reach the endpoint? Tests `filter` (or the endpoint's own) against `{id, type, time,
        data}` of an event with this type and payload; when it does not match, `failed` names the condition."""
        endpoint = get_owned(Endpoint, endpoint_id)
        return examples.try_filter(endpoint, data["event_type"], data["payload"], data.get("filter"),
                                    use_endpoint_filter="filter" not in data)


@blp.route("/<endpoint_id>/send-example")
class SendExample(MethodView):
    @blp.arguments(SendExampleSchema)
    @blp.response(202, EventSchema)
    @blp.alt_response(429, response="TOO_MANY_REQUESTS")
    def post(self, data: dict[str, Any], endpoint_id: str) -> Any:
        """Send the type's example from the catalog to this endpoint alone, as a test event (`test: true`):
        signed and delivered like any event, whatever the endpoint subscribes to or filters on; left out of
        `GET /v1/events` unless `include_test=true`. A type with no such example (or not in the catalog) is a 404."""
        endpoint = get_owned(Endpoint, endpoint_id)
        try:
            accepted = examples.send_example(current_tenant(), endpoint, data["event_type"], data["example"])
        except examples.NoExample as error:  # 404: the example asked for does not exist
            abort(404, message=str(error))
        except EventsRejected as error:  # an archived type, when the catalog is strict
            abort(422, message=str(error), errors={"json": error.problems[0]})
        except ingest.BatchOverRateLimit as error:
            abort(422, message=str(error))
        record_deliveries(request.environ, [accepted])
        return jsonify(accepted_body(accepted.event, accepted.deliveries)), 202, {
            "Location": url_for("events.Event", event_id=accepted.event.id)}
