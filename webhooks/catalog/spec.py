"""What an event type may hold as written (the API's body, each entry of a catalog file).

Shapes only: whether ``schema`` is a usable JSON Schema and each example fits it, and whether
each email template renders, is ``webhooks.catalog.store``'s check, made for every writer alike.
"""

from __future__ import annotations

from typing import Any

from marshmallow import Schema, ValidationError, fields, validate

from webhooks.catalog.mail_templates import MAX_TEMPLATE_CHARS
from webhooks.event_types import EVENT_TYPE_PATTERN

#: What a group name may look like (as an event type's name).
GROUP_PATTERN = EVENT_TYPE_PATTERN

#: Examples one event type may carry at most.
MAX_EXAMPLES = 10

#: A description's length at most.
MAX_DESCRIPTION = 2000

NAME_RULE = "must be 1 to 128 letters, digits, '_', '.' or '-'"


class JsonBoolean(fields.Boolean):
    """JSON ``true`` or ``false`` only."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> bool:
        if not isinstance(value, bool):
            raise self.make_error("invalid", input=value)
        return value


class JsonSchemaField(fields.Raw):
    """A JSON Schema: an object (``true``/``false`` are schemas too, but say nothing useful here)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        if not isinstance(value, dict):
            raise ValidationError("must be a JSON Schema (an object), or null for none")
        return value


#: What each template makes, for the OpenAPI document.
_TEMPLATE_PARTS = {"email_subject": "the subject (one line)", "email_text": "the plain-text body",
                   "email_html": "the HTML body (autoescaped)"}


def template_field(name: str) -> fields.String:
    """An email template (Jinja); ``""`` or null: none, the default rendering (``store`` stores null)."""
    return fields.String(
        allow_none=True, validate=validate.Length(max=MAX_TEMPLATE_CHARS[name]),
        metadata={"description": f"A Jinja template of {_TEMPLATE_PARTS[name]} of the emails `mailto:` endpoints get, "
                                 "with `id`, `type`, `timestamp` and `payload`; `\"\"` or null for the default rendering. "
                                 "One that does not compile or render an example is a 422 that says why."},
    )


class EventTypeUpdateSchema(Schema):
    """``PATCH /v1/event-types/<name>``: any of these; ``archived: false`` restores an archived type."""

    description = fields.String(validate=validate.Length(max=MAX_DESCRIPTION))
    group = fields.String(allow_none=True, validate=validate.Regexp(GROUP_PATTERN, error=NAME_RULE))
    schema = JsonSchemaField(
        allow_none=True,
        metadata={"type": "object", "nullable": True,
                  "description": "A JSON Schema (draft 2020-12) of the payload, self-contained (no remote `$ref`); "
                                 "null for none. An invalid schema is a 422 that says why."},
    )
    examples = fields.List(
        fields.Dict(), validate=validate.Length(max=MAX_EXAMPLES),
        metadata={"description": f"Up to {MAX_EXAMPLES} example payloads; each must validate against `schema`."},
    )
    deprecated = JsonBoolean()
    archived = JsonBoolean(metadata={"description": "`false` restores an archived type (`DELETE` archives it)."})
    email_subject = template_field("email_subject")
    email_text = template_field("email_text")
    email_html = template_field("email_html")


class EventTypeCreateSchema(EventTypeUpdateSchema):
    """``POST /v1/event-types`` and each entry of ``flask event-types import``."""

    class Meta:
        exclude = ("archived",)

    name = fields.String(
        required=True,
        validate=validate.Regexp(EVENT_TYPE_PATTERN, error=NAME_RULE),
        metadata={"description": "Unique; the operational types' names are taken (built in)."},
    )
