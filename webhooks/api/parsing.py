"""Strict JSON request bodies: standard JSON only, bounded nesting, every failure a 400.

Python's ``json`` accepts ``NaN``/``Infinity`` (which we could never send on as valid JSON)
and raises ``RecursionError`` or a plain ``ValueError`` on hostile input, which webargs
would let through as a 500. Our blueprints use this parser instead.

It also has a fast path for flat schemas (only ``String`` and plain ``Dict`` fields, no
hooks), such as the body and ``Idempotency-Key`` header of ``POST /v1/events``: a valid
request is checked with the fields' own validators and loaded without marshmallow's
machinery; anything else, every invalid request included, goes through marshmallow as
before, so errors read exactly as they always did.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping, NoReturn

import flask
import flask_smorest
from marshmallow import Schema, ValidationError, fields
from webargs import core
from webargs.flaskparser import FlaskParser, abort, is_json_request

#: Deepest nesting of arrays and objects a request body may have.
MAX_JSON_DEPTH = 64


class RefusedJson(json.JSONDecodeError):
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


def json_depth(value: Any) -> int:
    """How deeply arrays and objects nest in ``value`` (0 for a scalar); iterative, no recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
        else:
            deepest = max(deepest, depth)
            continue
        deepest = max(deepest, depth + 1)
    return deepest


def loads_strict(data: bytes) -> Any:
    """Parse a UTF-8 JSON document; raise ``JSONDecodeError`` for anything that is not plain JSON."""
    try:
        value = json.loads(data.decode("utf-8"), parse_constant=_reject_constant, parse_float=_finite_float)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        _invalid("nested too deeply")
    except ValueError as error:  # bad UTF-8, an integer with too many digits
        _invalid(str(error))
    # Every level opens a bracket, so a body with few brackets cannot nest too deeply:
    # counting bytes (in C) spares the walk over the parsed value on the usual request.
    if data.count(b"{") + data.count(b"[") > MAX_JSON_DEPTH and json_depth(value) > MAX_JSON_DEPTH:
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
    """The fields of ``schema`` if the fast path can load it exactly as marshmallow would, else None."""
    if schema._hooks and any(schema._hooks.values()) or schema.many or schema.partial:
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
    if not allow_unknown and any(key not in {f.data_key for f in flat} for key in raw):
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


class StrictJsonParser(FlaskParser):
    """webargs' Flask parser with ``loads_strict``, the reason in the 400 body and a fast path."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._flat: dict[int, tuple[Schema, tuple[_FlatField, ...] | None]] = {}

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

    def _fast_parse(self, schema: Schema, req: flask.Request, location: str) -> dict[str, Any] | None:
        cached = self._flat.get(id(schema))
        if cached is None or cached[0] is not schema:
            cached = self._flat[id(schema)] = (schema, flat_fields(schema))
        flat = cached[1]
        if flat is None:
            return None
        if location == "headers":  # unknown headers are ignored (webargs' EXCLUDE)
            return fast_load(flat, req.headers, allow_unknown=True)
        try:
            body = self._raw_load_json(req)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None  # marshmallow's path reports it
        if not isinstance(body, dict):
            return None
        return fast_load(flat, body, allow_unknown=False)

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


class Blueprint(flask_smorest.Blueprint):
    """flask-smorest's Blueprint parsing arguments with ``StrictJsonParser``."""

    ARGUMENTS_PARSER = StrictJsonParser()
