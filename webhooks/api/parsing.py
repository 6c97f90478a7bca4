"""Strict JSON request bodies: standard JSON only, bounded nesting, every failure a 400.

Python's ``json`` accepts ``NaN``/``Infinity`` (which we could never send on as valid JSON)
and raises ``RecursionError`` or a plain ``ValueError`` on hostile input, which webargs
would let through as a 500. Our blueprints use this parser instead.

It also has a fast path for flat schemas (only ``String`` and plain ``Dict`` fields, no
hooks), such as the body and ``Idempotency-Key`` header of ``POST /v1/events`` and each
item of ``POST /v1/events/batch`` (a ``many`` schema): a valid request is checked with the
fields' own validators and loaded without marshmallow's machinery; anything else, every
invalid request included, goes through marshmallow as before, so errors read exactly as
they always did.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, NoReturn

import flask
import flask_smorest
import orjson
from marshmallow import Schema, ValidationError, fields
from webargs import core
from webargs.flaskparser import FlaskParser, abort, is_json_request

from webhooks.errors import InvalidInput

#: Deepest nesting of arrays and objects a request body may have.
MAX_JSON_DEPTH = 64


class RefusedJson(json.JSONDecodeError, InvalidInput):
    """A body Python could parse (or choked on) that is not plain, bounded JSON."""

    def __init__(self, reason: str) -> None:
        # A non-empty ``doc``: webargs takes an empty one for "no body" and ignores the error.
        super().__init__(reason, "<request body>", 0)


def _invalid(reason: str) -> NoReturn:
    raise RefusedJson(reason)


def _reject_constant(name: str) -> NoReturn:
    _invalid(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        _invalid(f"number {text[:20]} is out of range")
    return value


#: An escape sequence inside a JSON string (``\"``, ``\\``, ``\n``, the first character of ``\uXXXX``).
_ESCAPE = re.compile(rb"\\.", re.DOTALL)

#: An innermost pair: an empty array or object once everything inside was peeled off.
_INNERMOST = re.compile(rb"\[\]|\{\}")

#: Every byte but brackets, braces and quotes (``bytes.translate`` deletes them).
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')


def nests_deeper_than(data: bytes, limit: int) -> bool:
    """Whether the JSON text ``data`` (well-formed) nests arrays and objects more than ``limit`` deep.

    Works on the text, in C: escapes removed (so every quote left opens or closes a
    string), everything but brackets and quotes dropped, what lies between quotes dropped,
    then one level of innermost pairs peeled off per pass (a regex pass never matches a
    pair that only its own removals formed), so ``limit`` passes empty a document
    ``limit`` deep. A batch of a hundred 1 KB events checks in a fraction of a
    millisecond, where walking the parsed values took several.
    """
    if b"\\" in data:
        data = _ESCAPE.sub(b"", data)
    brackets = b"".join(data.translate(None, _NOT_STRUCTURE).split(b'"')[::2])
    for _ in range(limit):
        if not brackets:
            return False
        brackets = _INNERMOST.sub(b"", brackets)
    return bool(brackets)


#: Nineteen digits in a row: a number orjson might not parse exactly (it reads an integer
#: beyond 64 bits as a float); such a body, rare, is parsed by the standard library.
_LONG_NUMBER = re.compile(rb"[0-9]{19}")


def loads_strict(data: bytes) -> Any:
    """Parse a UTF-8 JSON document; raise ``JSONDecodeError`` for anything that is not plain JSON.

    orjson (in C, four times faster on a batch) parses it when it can do so exactly: it
    refuses everything the standard library path refuses here (``NaN``, an infinite
    number, bad UTF-8, a byte order mark), so what it accepts reads the same either way.
    A body it refuses, or one with a long number, goes the standard library's way, and
    so every error reads as it always did.
    """
    if _LONG_NUMBER.search(data) is None:
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
        else:
            return _bounded(data, value)
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=_reject_constant, parse_float=_finite_float)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        _invalid("nested too deeply")
    except ValueError as error:  # bad UTF-8, an integer with too many digits
        _invalid(str(error))
    return _bounded(data, value)


def _bounded(data: bytes, value: Any) -> Any:
    """``value``, parsed from ``data``, unless ``data`` nests more than ``MAX_JSON_DEPTH`` deep."""
    # Every level opens a bracket, so a body with few brackets cannot nest too deeply:
    # counting bytes (in C) spares even the bracket scan on the usual single event.
    if data.count(b"{") + data.count(b"[") > MAX_JSON_DEPTH and nests_deeper_than(data, MAX_JSON_DEPTH):
        _invalid(f"nested deeper than {MAX_JSON_DEPTH} levels")
    return value


@dataclass(frozen=True)
class _FlatField:
    name: str
    data_key: str
    kind: type
    required: bool
    validators: tuple[Callable[[Any], Any], ...]


def flat_fields(schema: Schema) -> tuple[_FlatField, ...] | None:
    """The fields of ``schema`` (of each item, if ``many``) if the fast path can load it exactly as
    marshmallow would, else None."""
    if schema._hooks and any(schema._hooks.values()) or schema.partial:
        return None
    out = []
    for name, field in schema.load_fields.items():
        if type(field) is fields.String:
            kind: type = str
        elif type(field) is fields.Dict and field.key_field is None and field.value_field is None:
            kind = dict
        else:
            return None
        if field.allow_none or field.load_default is not core.missing and field.load_default is not None:
            return None
        out.append(_FlatField(name, field.data_key or name, kind, field.required, tuple(field.validators)))
    return tuple(out)


def fast_load(flat: tuple[_FlatField, ...], raw: Mapping[str, Any], allow_unknown: bool) -> dict[str, Any] | None:
    """``raw`` loaded as marshmallow would load it when valid; None when marshmallow must decide."""
    known = {f.data_key for f in flat}
    if not allow_unknown and any(key not in known for key in raw):
        return None
    data: dict[str, Any] = {}
    for field in flat:
        value = raw.get(field.data_key, core.missing)
        if value is core.missing:
            if field.required:
                return None
            continue
        if not isinstance(value, field.kind):
            return None
        try:
            for validator in field.validators:
                if validator(value) is False:
                    return None
        except ValidationError:
            return None
        data[field.name] = dict(value) if field.kind is dict else value
    return data


#: ``id(schema) -> (schema, its flat fields or None)``: worked out once per schema instance.
_FLAT: dict[int, tuple[Schema, tuple[_FlatField, ...] | None]] = {}


def _flat_of(schema: Schema) -> tuple[_FlatField, ...] | None:
    cached = _FLAT.get(id(schema))
    if cached is None or cached[0] is not schema:
        cached = _FLAT[id(schema)] = (schema, flat_fields(schema))
    return cached[1]


def fast_load_headers(schema: Schema, headers: Mapping[str, Any]) -> dict[str, Any] | None:
    """``headers`` loaded by a flat ``schema`` as webargs would (unknown headers ignored); None: ask marshmallow."""
    flat = _flat_of(schema)
    return None if flat is None or schema.many else fast_load(flat, headers, allow_unknown=True)


def fast_load_body(schema: Schema, body: Any) -> dict[str, Any] | list[dict[str, Any]] | None:
    """A parsed JSON ``body`` loaded by a flat ``schema`` (a list of items if ``many``); None: ask marshmallow."""
    flat = _flat_of(schema)
    if flat is None:
        return None
    if not schema.many:
        return fast_load(flat, body, allow_unknown=False) if isinstance(body, dict) else None
    if not isinstance(body, list):
        return None
    items = []
    for raw in body:
        item = fast_load(flat, raw, allow_unknown=False) if isinstance(raw, dict) else None
        if item is None:
            return None
        items.append(item)
    return items


#: marshmallow's words for a body (or an item, or a nested object) of the wrong JSON type.
MARSHMALLOW_TYPE_ERROR = "Invalid input type."


def one_message_each(messages: Any, many: bool = False) -> Any:
    """``messages`` (marshmallow's, per field) with one message per field, the first: each field lists
    its clearest checks first, and the patterns the OpenAPI document states after them, which refuse
    the same values again in other words. A body of the wrong type says what was expected."""
    if isinstance(messages, dict):
        return {key: one_message_each(value, many and key == "_schema") for key, value in messages.items()}
    if isinstance(messages, list) and messages and all(isinstance(message, str) for message in messages):
        first = messages[0]
        if first == MARSHMALLOW_TYPE_ERROR:
            first = "expected a JSON array of objects" if many else "expected a JSON object"
        return [first]
    return messages


class StrictJsonParser(FlaskParser):
    """webargs' Flask parser with ``loads_strict``, the reason in the 400 body, one message per
    field in a 422 and a fast path."""

    def handle_error(self, error: ValidationError, req: flask.Request, schema: Schema, *,
                     error_status_code: int | None, error_headers: Mapping[str, str] | None) -> NoReturn:
        messages = {location: one_message_each(found, schema.many) for location, found in error.messages.items()}
        super().handle_error(ValidationError(messages, data=error.data, valid_data=error.valid_data), req, schema,
                             error_status_code=error_status_code, error_headers=error_headers)

    def parse(self, argmap: Any, req: flask.Request | None = None, *, location: str | None = None,
              **kwargs: Any) -> Any:
        if (
            isinstance(argmap, Schema)
            and location in ("json", "headers")
            and not kwargs.get("validate")
            and kwargs.get("unknown", core._UNKNOWN_DEFAULT_PARAM) is core._UNKNOWN_DEFAULT_PARAM
        ):
            data = self._fast_parse(argmap, req or flask.request, location)
            if data is not None:
                return data
        return super().parse(argmap, req, location=location, **kwargs)

    def _fast_parse(self, schema: Schema, req: flask.Request,
                    location: str) -> dict[str, Any] | list[dict[str, Any]] | None:
        if _flat_of(schema) is None:
            return None
        if location == "headers":
            return fast_load_headers(schema, req.headers)
        try:
            body = self._raw_load_json(req)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None  # marshmallow's path reports it
        return fast_load_body(schema, body)

    def _raw_load_json(self, req: flask.Request) -> Any:
        if not is_json_request(req):
            return core.missing
        return loads_strict(req.get_data(cache=True))

    def _handle_invalid_json_error(
        self, error: json.JSONDecodeError | UnicodeDecodeError, req: flask.Request, *args: Any, **kwargs: Any
    ) -> NoReturn:
        # A syntax error says where it is; our own refusals have no position.
        detail = error.msg if isinstance(error, RefusedJson) else str(error)
        abort(400, exc=error, messages={"json": [f"Invalid JSON body: {detail}"]})


#: What a request with a body must say it is (anything else is a 415).
JSON_CONTENT_TYPE = "application/json"


def require_json_body(required: bool) -> None:
    """Abort 415 unless the request's body, if any, is declared JSON; 400 when a required body is empty.

    webargs reads a body only when its content type is JSON and takes any other as "no body",
    which turned a form post into ``422 event_type: Missing data for required field``.
    """
    request = flask.request
    has_body = bool(request.content_length) or request.headers.get("Transfer-Encoding") is not None
    if not is_json_request(request):
        if has_body or required:
            given = request.headers.get("Content-Type")
            flask_smorest.abort(415, message=(
                f"expected a JSON body sent with 'content-type: {JSON_CONTENT_TYPE}'"
                + (f", not {given!r}" if given else " (the request has no content type)")
            ))
        return
    if required and not request.get_data(cache=True):
        flask_smorest.abort(400, message="the request body is empty: a JSON document is required")


class Blueprint(flask_smorest.Blueprint):
    """flask-smorest's Blueprint parsing arguments with ``StrictJsonParser``; JSON bodies only (else 415)."""

    ARGUMENTS_PARSER = StrictJsonParser()

    def arguments(self, schema: Any, *, location: str = "json", required: bool = True,
                  **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        decorate = super().arguments(schema, location=location, required=required, **kwargs)
        if location != "json":
            return decorate

        def decorator(view: Callable[..., Any]) -> Callable[..., Any]:
            parsed = decorate(view)

            @functools.wraps(parsed)  # keeps flask-smorest's ``_apidoc``
            def checked(*args: Any, **view_kwargs: Any) -> Any:
                require_json_body(required)
                return parsed(*args, **view_kwargs)

            return checked

        return decorator
