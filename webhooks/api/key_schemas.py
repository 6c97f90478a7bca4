"""Marshmallow schemas of API keys (``/v1/api-keys``, tenant and platform alike): creating,
rotating with an overlap, and how a key is shown (its secret once only).

Unknown fields are rejected (marshmallow's default ``RAISE``), as in every schema of the API.
"""

from __future__ import annotations

from marshmallow import Schema, ValidationError, fields, validate

from webhooks.api.fields import STORABLE, UtcDateTime
from webhooks.durations import parse_seconds, pattern_up_to


#: A rotated API key keeps working this long at most (a forgotten overlap must not live forever).
MAX_KEY_OVERLAP = "30d"


def _overlap(value: str) -> None:
    try:
        seconds = parse_seconds(value)
    except ValueError as error:
        raise ValidationError(str(error)) from None
    if seconds > parse_seconds(MAX_KEY_OVERLAP):
        raise ValidationError(f"must be at most {MAX_KEY_OVERLAP}")


class ApiKeyCreateSchema(Schema):
    name = fields.String(
        required=True, validate=[validate.Length(1, 100), *STORABLE],
        metadata={"description": "What the key is for, e.g. `billing-service` (shown in listings)."},
    )


class ApiKeyRotateSchema(Schema):
    overlap = fields.String(
        load_default="24h",
        validate=[validate.Regexp(pattern_up_to(MAX_KEY_OVERLAP),
                                  error=f"must be a duration such as 24h, 90m or 0s, at most {MAX_KEY_OVERLAP}"),
                  _overlap],
        metadata={"description": f"How long the old key keeps working, e.g. `24h` (at most {MAX_KEY_OVERLAP}); "
                                 "`0s` revokes it at once."},
    )


class ApiKeySchema(Schema):
    id = fields.String()
    name = fields.String()
    created_at = UtcDateTime()
    last_used_at = UtcDateTime(
        allow_none=True, metadata={"description": "Recorded at most once a minute: it may lag by that much."}
    )
    expires_at = UtcDateTime(allow_none=True, metadata={"description": "Set when a rotation replaced the key."})


class ApiKeyListSchema(Schema):
    data = fields.List(fields.Nested(ApiKeySchema), metadata={"description": "Live keys, oldest first."})


class ApiKeyCreatedSchema(ApiKeySchema):
    api_key = fields.String(metadata={"description": "The whole key, `<id>.<secret>`: shown this once only."})


class ApiKeyRotatedSchema(ApiKeyCreatedSchema):
    replaced = fields.Nested(ApiKeySchema, metadata={"description": "The old key, with its `expires_at`."})
