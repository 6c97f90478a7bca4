"""Marshmallow schemas of events, deliveries and attempts (``/v1/events``, ``/v1/deliveries``, the
attempt pages), the list arguments and pages they share, and the health answer: what a request may
hold and how each object is shown. Endpoints' are in ``endpoint_schemas``, API keys' in
``key_schemas``, tenants' in ``tenant_schemas``.

Unknown fields are rejected (marshmallow's default ``RAISE``), so a typo gets a 422
naming the field instead of being silently ignored.
"""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from webhooks.api.fields import (
    CursorPageSchema,
    DEFAULT_PAGE_SIZE, EVENT_TYPE, IDEMPOTENCY_KEY, MAX_PAGE_SIZE, MAX_SEQ, ShownUrl, UtcDateTime, cursor_field, id_pattern,
)
from webhooks.event_types import OPERATIONAL_EVENT_TYPES
from webhooks.storage.statuses import DELIVERY_STATUSES


# --- requests ---------------------------------------------------------------------------


class EventCreateSchema(Schema):
    event_type = fields.String(
        required=True,
        validate=[
            EVENT_TYPE,
            validate.NoneOf(OPERATIONAL_EVENT_TYPES, error="is reserved for events the service raises itself"),
        ],
    )
    payload = fields.Dict(required=True, metadata={"description": "Any JSON object; sent as `data`."})
    idempotency_key = fields.String(validate=IDEMPOTENCY_KEY)


class IdempotencyHeaderSchema(Schema):
    idempotency_key = fields.String(data_key="Idempotency-Key", validate=IDEMPOTENCY_KEY)


class EndpointListArgsSchema(Schema):
    cursor = cursor_field("ep")
    limit = fields.Integer(load_default=DEFAULT_PAGE_SIZE, validate=validate.Range(1, MAX_PAGE_SIZE))


class AttemptListArgsSchema(EndpointListArgsSchema):
    cursor = cursor_field("att")


class DeliveryListArgsSchema(EndpointListArgsSchema):
    cursor = cursor_field("dlv")
    status = fields.String(
        validate=validate.OneOf(DELIVERY_STATUSES, error="must be one of: {choices}"),
        metadata={"description": "Only deliveries with this status: `failed` lists what exhausted its retries."},
    )
    endpoint_id = fields.String(
        validate=validate.Regexp(id_pattern("ep"), error="must be an endpoint id (ep_ and 26 letters and digits)"),
        metadata={"description": "Only deliveries to this endpoint."},
    )
    since = UtcDateTime(metadata={"description": "Only deliveries created at or after this time (ISO 8601)."})


class EventListArgsSchema(Schema):
    after = fields.Integer(
        load_default=0,
        validate=validate.Range(0, MAX_SEQ),
        metadata={"description": "Only events with a larger `seq`."},
    )
    limit = fields.Integer(load_default=DEFAULT_PAGE_SIZE, validate=validate.Range(1, MAX_PAGE_SIZE))
    event_type = fields.String(validate=EVENT_TYPE)
    include_test = fields.Boolean(
        load_default=False, truthy={"true"}, falsy={"false"},
        metadata={"description": "`true`: the test events of `send-example` too (left out by default)."},
    )


# --- responses --------------------------------------------------------------------------


class DeliverySummarySchema(Schema):
    id = fields.String()
    endpoint_id = fields.String()
    status = fields.String(metadata={"description": "pending, retrying, parked, delivered, failed or cancelled."})
    fallback = fields.Boolean(metadata={"description": "A copy for the endpoint's `fallback_url`, made while the "
                                                       "endpoint was offline or disabled."})


class DeliverySchema(DeliverySummarySchema):
    event_id = fields.String()
    attempts = fields.Integer()
    next_attempt_at = UtcDateTime(allow_none=True)
    last_status_code = fields.Integer(allow_none=True)
    last_error = fields.String(allow_none=True)
    created_at = UtcDateTime()
    delivered_at = UtcDateTime(allow_none=True)


class AttemptSchema(Schema):
    id = fields.String()
    delivery_id = fields.String()
    event_id = fields.String()
    endpoint_id = fields.String()
    attempt_no = fields.Integer()
    trigger = fields.String(metadata={"description": "ladder, resend, recover, or probe (of an offline endpoint)."})
    started_at = UtcDateTime()
    duration_ms = fields.Float()
    url = ShownUrl()
    fallback = fields.Boolean(metadata={"description": "An attempt of a fallback delivery (to the `fallback_url`)."})
    request_headers = fields.Dict()
    response_status = fields.Integer(allow_none=True)
    response_headers = fields.Dict(allow_none=True)
    response_body = fields.String(allow_none=True)
    error_class = fields.String(allow_none=True)
    error = fields.String(allow_none=True)
    outcome = fields.String()
    next_attempt_at = UtcDateTime(allow_none=True)


class DeliveryDetailSchema(DeliverySchema):
    recent_attempts = fields.List(fields.Nested(AttemptSchema), metadata={"description": "Newest first, at most 20."})


class EventSchema(Schema):
    id = fields.String()
    seq = fields.Integer(metadata={"description": "Per-tenant, in commit order: the `after` cursor."})
    event_type = fields.String()
    payload = fields.Dict()
    created_at = UtcDateTime()
    test = fields.Boolean(metadata={"description": "A test event (`send-example`): sent to one endpoint only."})
    deliveries = fields.List(fields.Nested(DeliverySummarySchema))


class BatchEventSchema(EventSchema):
    """An event of a batch's answer: without its payload (the caller has just sent it)."""

    class Meta:
        exclude = ("payload", "test")

    replayed = fields.Boolean(
        metadata={"description": "True when the item's idempotency key named this event already: nothing was created."}
    )


class EventBatchSchema(Schema):
    data = fields.List(fields.Nested(BatchEventSchema),
                       metadata={"description": "One event per item, in request order."})


class EventDetailSchema(EventSchema):
    deliveries = fields.List(fields.Nested(DeliverySchema))


class EventPageSchema(CursorPageSchema):
    data = fields.List(fields.Nested(EventSchema))
    next_cursor = fields.Integer(
        metadata={"description": "Always present: pass it as `after` to continue (or to poll)."}
    )


class DeliveryPageSchema(CursorPageSchema):
    data = fields.List(fields.Nested(DeliverySchema))


class AttemptPageSchema(CursorPageSchema):
    data = fields.List(fields.Nested(AttemptSchema))


class HealthSchema(Schema):
    status = fields.String(metadata={"description": "ok, degraded (broker down) or down (database down)."})
    checks = fields.Dict(keys=fields.String(), values=fields.String())
