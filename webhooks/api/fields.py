"""The fields, limits and checks the API's schemas are built from (``webhooks.api.schemas``).

Each limit is a named constant; each check gives a message that names the problem and,
where OpenAPI can say it, a pattern the document states too.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable

from marshmallow import Schema, ValidationError, fields, validate

from webhooks.catalog.filters import FilterError, compile_filter
from webhooks.delivery.destinations import split_target
from webhooks.delivery.signing import SCHEMES, is_valid_secret
from webhooks.event_types import EVENT_TYPE_PATTERN
from webhooks.secrecy import mask
from webhooks.storage.ids import ALPHABET
from webhooks.storage.timeutil import isoformat, to_naive_utc

#: Endpoint URLs longer than this are refused (no receiver needs more).
MAX_URL_LENGTH = 2048

#: An endpoint subscribes to at most this many event types (its filter is matched on every event).
MAX_EVENT_TYPES = 100

#: Endpoint metadata: at most this many keys, each key and value bounded.
MAX_METADATA_KEYS = 50

#: Page sizes: ``limit`` defaults to 50 and may not exceed 250 (one page is one bounded query).
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 250

#: ``seq`` is a BIGINT column: a larger ``after`` would be a database error, not an empty page.
MAX_SEQ = 2**63 - 1

EVENT_TYPE = validate.Regexp(EVENT_TYPE_PATTERN, error="must be 1 to 128 letters, digits, '_', '.' or '-'")

SCHEME = validate.OneOf(SCHEMES, error="unknown signature scheme {input!r}: use 'v1' or 'v1a'")


def unique(values: list[Any]) -> None:
    if len(set(values)) != len(values):
        raise ValidationError("must not repeat an event type")


def storable_text(value: str) -> None:
    """Text kept in a text column as is: refused here (422) rather than failing in the database.

    PostgreSQL text cannot hold NUL, and UTF-8 cannot encode an unpaired surrogate (which a
    JSON ``\\ud800`` escape produces). JSON columns are safe: they store such characters escaped.
    """
    if "\x00" in value:
        raise ValidationError("must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError("must be valid Unicode (no unpaired surrogates)") from None


#: ``storable_text``'s NUL rule as a pattern, so the OpenAPI document states it too (it never fails after that
#: check). Unpaired surrogates stay unstated: validators of OpenAPI patterns (Rust's regex) cannot name them.
STORABLE_PATTERN = validate.Regexp(r"^[^\x00]*$", error="must not contain NUL characters")

#: Text kept in a text column: the check with the clear message, then the documented pattern.
STORABLE: list[Callable[[str], Any]] = [storable_text, STORABLE_PATTERN]

#: An idempotency key, in the body or the ``Idempotency-Key`` header.
IDEMPOTENCY_KEY: list[Callable[[str], Any]] = [validate.Length(1, 255), *STORABLE]


class StrictBoolean(fields.Boolean):
    """JSON ``true`` or ``false`` only (marshmallow's Boolean also takes 0, 1, "yes", "on" …)."""

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> bool:
        if not isinstance(value, bool):
            raise self.make_error("invalid", input=value)
        return value


class ShownUrl(fields.String):
    """An endpoint's URL as it is shown: a destination's password masked (``redis://user:***@host/…``)."""

    def _serialize(self, value: Any, attr: str | None, obj: Any, **kwargs: Any) -> str | None:
        return None if value is None else mask(str(value))


def parses_as_url(value: str) -> None:
    """Belt and braces behind ``URL_PATTERN``: the URL names a kind of destination and parses as it will."""
    try:
        split_target(value)
    except ValueError as error:
        raise ValidationError(str(error)) from None


_B64 = "[A-Za-z0-9+/]"
#: ``whsec_`` + base64 (padded) of 24 to 64 bytes: 8 to 21 full quads, a padded tail only where the
#: byte count stays within 64 (21 quads + ``xx==`` is 64 bytes, + ``xxx=`` would be 65).
SECRET_PATTERN = (
    f"^whsec_(?:(?:{_B64}{{4}}){{8,20}}(?:{_B64}{{2}}==|{_B64}{{3}}=)?|(?:{_B64}{{4}}){{21}}(?:{_B64}{{2}}==)?)"
    "$(?!\\n)"
)


def valid_secret(value: str) -> None:
    if not is_valid_secret(value):
        raise ValidationError("must be 'whsec_' followed by the base64 of 24 to 64 bytes")


def id_pattern(prefix: str) -> str:
    """The ids of one kind (``ep_…``), as a regex that reads the same in Python and in OpenAPI."""
    return f"^{prefix}_[{ALPHABET}]{{26}}$(?!\\n)"


def cursor_field(prefix: str) -> fields.String:
    """The ``cursor`` of a list whose rows have ``prefix`` ids: the ``next_cursor`` of its previous page."""
    return fields.String(
        validate=validate.Regexp(id_pattern(prefix), error="must be the next_cursor of a previous page of this list"),
        metadata={"description": "Opaque: the `next_cursor` of the previous page, passed back unchanged "
                                 "(absent for the first page). Anything else is a 422."},
    )


class UtcDateTime(fields.DateTime):
    """Naive UTC (as stored) out as ISO 8601 with ``Z``; in, aware or naive (taken as UTC)."""

    def _serialize(self, value: datetime | None, attr: str | None, obj: Any, **kwargs: Any) -> str | None:
        return isoformat(value)

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> datetime:
        try:
            return to_naive_utc(super()._deserialize(value, attr, data, **kwargs))
        except OverflowError:  # e.g. 0001-01-01T00:00+01:00 is before year 1 in UTC
            raise ValidationError("is out of range once converted to UTC") from None


#: Where the OpenAPI document keeps the filter's shape (registered by ``webhooks.api.register_blueprints``).
FILTER_COMPONENT = "EndpointFilter"


class FilterField(fields.Raw):
    """An endpoint's ``filter``: checked and compiled (``webhooks.catalog.filters``); ``{}`` loads as None."""

    def __init__(self, description: str | None = None, **kwargs: Any) -> None:
        shape = {"oneOf": [{"$ref": f"#/components/schemas/{FILTER_COMPONENT}"}], "nullable": True}
        super().__init__(allow_none=True, metadata=shape | ({"description": description} if description else {}),
                         **kwargs)

    def _deserialize(self, value: Any, attr: str | None, data: Any, **kwargs: Any) -> Any:
        try:
            compile_filter(value)
        except FilterError as error:
            raise ValidationError({error.path or "_filter": [error.message]}) from None
        return value or None


def metadata_field(**kwargs: Any) -> fields.Dict:
    """Free-form string metadata (an endpoint's, a tenant's): at most ``MAX_METADATA_KEYS`` keys,
    each value at most 1000 characters. Keys are any strings (OpenAPI 3.0 cannot state a bound on
    keys; the body size bounds them)."""
    return fields.Dict(keys=fields.String(), values=fields.String(validate=validate.Length(max=1000)),
                       validate=validate.Length(max=MAX_METADATA_KEYS), **kwargs)


class CursorPageSchema(Schema):
    """A page of a list: the items in ``data`` (a subclass names what they are), then where to go on."""

    data = fields.List(fields.Raw())
    next_cursor = fields.String(allow_none=True, metadata={"description": "Null on the last page."})
    has_more = fields.Boolean()
