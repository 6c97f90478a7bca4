"""Strict JSON request bodies: standard JSON only, bounded nesting, every failure a 400.

Python's ``json`` accepts ``NaN``/``Infinity`` (which we could never send on as valid JSON)
and raises ``RecursionError`` or a plain ``ValueError`` on hostile input, which webargs
would let through as a 500. Our blueprints use this parser instead.
"""

from __future__ import annotations

import json
from typing import Any, NoReturn

import flask
import flask_smorest
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
    if json_depth(value) > MAX_JSON_DEPTH:
        _invalid(f"nested deeper than {MAX_JSON_DEPTH} levels")
    return value


class StrictJsonParser(FlaskParser):
    """webargs' Flask parser with ``loads_strict`` and the reason in the 400 body."""

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
