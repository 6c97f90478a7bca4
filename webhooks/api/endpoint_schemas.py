"""Marshmallow schemas of endpoints (``/v1/endpoints``): registering and changing one, rotating
its secret, recovering, and how an endpoint, its health and its verification keys are shown.

Unknown fields are rejected (marshmallow's default ``RAISE``), so a typo gets a 422
naming the field instead of being silently ignored.
"""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from webhooks.api.fields import (
    CursorPageSchema,
    EVENT_TYPE, FilterField, MAX_EVENT_TYPES, MAX_URL_LENGTH, SCHEME, SECRET_PATTERN, STORABLE, ShownUrl, StrictBoolean,
    UtcDateTime, metadata_field, parses_as_url, unique, valid_secret,
)
from webhooks.delivery.destinations import URL_PATTERN
from webhooks.delivery.signing import SCHEMES, public_key, scheme_of, shared_secret
from webhooks.health.presence import health_of


class EndpointCreateSchema(Schema):
    url = fields.String(
        required=True,
        validate=[
            validate.Length(1, MAX_URL_LENGTH),
            parses_as_url,  # the specific reason first (a 422 shows each field's first)
            validate.Regexp(URL_PATTERN, error="must be an http(s)://, amqp(s)://, redis(s):// URL with a host name or IP address, or mailto:addresses"),
        ],
        metadata={"description": "Where events go, by scheme. `http://` or `https://`: POSTed there (a host name or "
                                 "IP address, an optional port and path). `amqp://user:password@host:port/vhost?exchange=X&"
                                 "routing_key=K` or `amqps://` (TLS): published to a RabbitMQ exchange, confirmed. "
                                 "`redis://[user:password@]host:port/db?stream="
                                 "NAME[&maxlen=N]` or `rediss://` (TLS): added to a Redis stream. `mailto:ops@example.com[,"
                                 "…]` (up to 10 addresses): emailed through the service's SMTP server, with the "
                                 "event type's email templates (a 422 when the service sends no email). Printable ASCII; "
                                 "percent-encode the rest. A password in the URL is never shown again."},
    )
    fallback_url = fields.String(
        allow_none=True,
        validate=url.validators,
        metadata={"description": "Where each event goes as well while the endpoint is offline or disabled, once "
                                 "(any kind, as `url`; signed with the endpoint's secret); what the endpoint "
                                 "missed is still released to it in order when it is back. Null: no fallback."},
    )
    event_types = fields.List(
        fields.String(validate=EVENT_TYPE),
        validate=[validate.Length(max=MAX_EVENT_TYPES), unique],
        metadata={"description": "Event types to receive; empty or absent means every non-operational type.",
                  "uniqueItems": True},
    )
    description = fields.String(validate=[validate.Length(max=1000), *STORABLE])
    rate_limit = fields.Integer(
        strict=True,
        allow_none=True,
        validate=validate.Range(1, 10_000),
        metadata={"description": "Calls per second at most; null for no limit."},
    )
    metadata = metadata_field()
    contact_email = fields.Email(
        allow_none=True,
        validate=validate.Length(max=320),
        metadata={"description": "Who is emailed when the endpoint goes offline, comes back or is disabled."},
    )
    filter = FilterField()
    signature_scheme = fields.String(
        validate=SCHEME,
        metadata={
            "description": "`v1` (default): HMAC-SHA256 with a shared `whsec_` secret. `v1a`: ed25519, verified "
            "with the `whpk_` public key alone (the private key never leaves the service)."
        },
    )


class EndpointUpdateSchema(EndpointCreateSchema):
    """Every field optional (load with ``partial=True``); ``disabled`` or ``status`` stops or resumes calls.

    The signature scheme changes only with a rotation (``POST …/secret/rotate``), never by PATCH.
    """

    class Meta:
        exclude = ("signature_scheme",)

    disabled = StrictBoolean()
    status = fields.String(
        validate=validate.OneOf(["enabled", "disabled"], error="unknown status {input!r}: use 'enabled' or 'disabled'"),
        metadata={"description": "`disabled` stops calls; `enabled` resumes them and releases what was parked."},
    )


class SecretRotateSchema(Schema):
    secret = fields.String(
        validate=[validate.Regexp(SECRET_PATTERN, error="must be 'whsec_' followed by the base64 of 24 to 64 bytes"),
                  valid_secret],
        metadata={"description": "The new secret (v1 only): `whsec_` + base64 of 24 to 64 random bytes; "
                                 "generated when absent."},
    )
    scheme = fields.String(
        validate=SCHEME,
        metadata={"description": "The scheme of the new key; the endpoint's current one when absent."},
    )


class RecoverSchema(Schema):
    since = UtcDateTime(required=True, metadata={"description": "ISO 8601; without an offset it is UTC."})


def _scheme_field() -> fields.Function:
    return fields.Function(
        lambda endpoint: scheme_of(endpoint.secret),
        metadata={"type": "string", "enum": list(SCHEMES), "description": "`v1` (HMAC-SHA256) or `v1a` (ed25519)."},
    )


class ConcurrencySchema(Schema):
    window = fields.Integer(
        allow_none=True,
        metadata={"description": "Calls the workers may have in flight to this endpoint now: grows while it answers "
                                 "well, cut on timeouts, errors, 5xx and 429 (null: no worker is calling it now)."},
    )
    ceiling = fields.Integer(metadata={"description": "The most the window may grow to (`ENDPOINT_MAX_IN_FLIGHT`)."})
    in_flight = fields.Integer(metadata={"description": "Calls in flight now."})


#: While the endpoint is offline, when it is probed next (``webhooks.health.probes``).
NEXT_PROBE_AT = UtcDateTime(
    allow_none=True, attribute="probe_due_at",
    metadata={"description": "While the endpoint is offline: when it is probed next, with its oldest undelivered "
                             "delivery (`POST /v1/endpoints/{endpoint_id}/probe` probes it now). Null otherwise."},
)


#: ``presence.LAST_SUCCESS_RESOLUTION_SECONDS``: a healthy endpoint's row is not written on every success.
LAST_SUCCESS_AT = UtcDateTime(
    allow_none=True,
    metadata={"description": "When an attempt last succeeded. Recorded at most once a minute while the endpoint "
                             "keeps succeeding, so it can lag the latest success by up to 60 seconds."},
)


class EndpointSchema(Schema):
    id = fields.String()
    url = ShownUrl(metadata={"description": "Where events go; a password in it shows as `***`."})
    fallback_url = ShownUrl(allow_none=True, metadata={
        "description": "Where events go too while the endpoint is offline or disabled; a password shows as `***`."})
    description = fields.String()
    event_types = fields.List(fields.String())
    rate_limit = fields.Integer(allow_none=True)
    metadata = fields.Dict(keys=fields.String(), values=fields.String())
    disabled = fields.Boolean()
    disabled_reason = fields.String(allow_none=True)
    contact_email = fields.String(allow_none=True)
    health = fields.Function(
        health_of, metadata={"description": "online, offline, recovering (releasing what it missed) or disabled."}
    )
    consecutive_failures = fields.Integer()
    failing_since = UtcDateTime(allow_none=True)
    offline_since = UtcDateTime(allow_none=True)
    next_probe_at = NEXT_PROBE_AT
    last_success_at = LAST_SUCCESS_AT
    parked_count = fields.Integer(metadata={"description": "Deliveries waiting for the endpoint to be back."})
    oldest_parked_at = UtcDateTime(allow_none=True)
    concurrency = fields.Nested(ConcurrencySchema)
    filter = fields.Dict(allow_none=True, metadata={"description": "Only events matching it are delivered; null: all."})
    signature_scheme = _scheme_field()
    created_at = UtcDateTime()
    updated_at = UtcDateTime()


class ProbeResultSchema(Schema):
    endpoint_id = fields.String()
    delivery_id = fields.String(metadata={"description": "The delivery the endpoint is probed with: the oldest it "
                                                         "is still owed, so what it missed arrives in order."})
    attempt_no = fields.Integer(metadata={"description": "The probe's attempt number (see the delivery's attempts)."})


class HealthChangeSchema(Schema):
    from_state = fields.String(data_key="from")
    to_state = fields.String(data_key="to")
    reason = fields.String()
    created_at = UtcDateTime(data_key="at")


class EndpointHealthSchema(Schema):
    health = fields.String()
    consecutive_failures = fields.Integer()
    failing_since = UtcDateTime(allow_none=True)
    offline_since = UtcDateTime(allow_none=True)
    next_probe_at = NEXT_PROBE_AT
    last_success_at = LAST_SUCCESS_AT
    parked_count = fields.Integer()
    oldest_parked_at = UtcDateTime(allow_none=True)
    changes = fields.List(fields.Nested(HealthChangeSchema), metadata={"description": "Newest first, at most 100."})


class VerificationKeysSchema(Schema):
    """What a receiver verifies with, from an endpoint's key: never the private ``whsk_`` key itself."""

    secret = fields.Function(
        lambda endpoint: shared_secret(endpoint.secret),
        allow_none=True,
        metadata={"type": "string", "description": "v1: the `whsec_` secret to verify with. v1a: null."},
    )
    public_key = fields.Function(
        lambda endpoint: public_key(endpoint.secret),
        allow_none=True,
        metadata={"type": "string", "description": "v1a: the `whpk_` public key to verify with. v1: null."},
    )


class EndpointWithSecretSchema(EndpointSchema, VerificationKeysSchema):
    pass


class SecretSchema(VerificationKeysSchema):
    scheme = _scheme_field()


class EndpointPageSchema(CursorPageSchema):
    data = fields.List(fields.Nested(EndpointSchema))


class RecoverResultSchema(Schema):
    queued = fields.Integer(metadata={"description": "Failed deliveries queued for a fresh attempt now."})
    parked = fields.Integer(metadata={"description": (
        "Parked deliveries created since `since`, left parked: they are released one at a time, in "
        "creation order and with their remaining attempts, when the endpoint is reachable again."
    )})
