"""JSON Schema (draft 2020-12) of an event type's payload: checked when written, compiled once,
and a payload's failures as ``(JSON path, rule, message)``.

Validation is ``jsonschema_rs`` (Rust, the validator schemathesis ships with): a payload that
passes costs one call in C, a failing one is walked for every error. Remote ``$ref``s are
never fetched: a schema is self-contained (``$defs``), so writing one cannot make the
service call out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NoReturn

import jsonschema_rs

from webhooks.errors import InvalidInput

#: The only dialect a schema may declare (``$schema``); absent means this one.
DIALECT = "https://json-schema.org/draft/2020-12/schema"

#: Failures reported per payload at most (a payload failing everywhere is not a page of errors).
MAX_ERRORS = 20


class InvalidSchema(InvalidInput):
    """A schema that is not a valid draft 2020-12 schema, or cannot be compiled; says why."""


@dataclass(frozen=True)
class Failure:
    """One way a payload breaks its schema: where (``$.items[0].sku``), which rule (``required``), why."""

    path: str
    rule: str
    message: str


def _no_remote(uri: str) -> NoReturn:
    raise ValueError(f"remote references are not fetched ({uri}): put the definition under $defs")


def json_path(parts: list[str | int]) -> str:
    """``["items", 0, "sku"]`` as ``$.items[0].sku`` (keys that are not plain names quoted: ``$["a b"]``)."""
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isidentifier():
            out += f".{part}"
        else:
            out += f"[{json.dumps(part)}]"
    return out


def compile_schema(schema: Any) -> jsonschema_rs.Draft202012Validator:
    """The validator of ``schema``, or InvalidSchema saying what is wrong with it (and where)."""
    if not isinstance(schema, (dict, bool)):
        raise InvalidSchema("must be a JSON Schema: an object (or true/false)")
    if isinstance(schema, dict) and schema.get("$schema", DIALECT) != DIALECT:
        raise InvalidSchema(f"$schema must be {DIALECT!r} (draft 2020-12) or absent")
    try:
        jsonschema_rs.meta.validate(schema)
    except jsonschema_rs.ValidationError as error:
        where = json_path(list(error.instance_path))
        raise InvalidSchema(f"not a valid draft 2020-12 schema at {where}: {error.message}") from None
    except jsonschema_rs.ReferencingError as error:
        raise InvalidSchema(str(error)) from None
    try:
        return jsonschema_rs.Draft202012Validator(schema, retriever=_no_remote, validate_formats=True)
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError) as error:
        raise InvalidSchema(str(error).split("\n")[0]) from None


def failures(validator: jsonschema_rs.Draft202012Validator, payload: Any) -> list[Failure]:
    """Every way ``payload`` breaks the schema (at most ``MAX_ERRORS``); empty when it is valid."""
    if validator.is_valid(payload):
        return []
    found = []
    for error in validator.iter_errors(payload):
        rule = next((str(p) for p in reversed(error.schema_path) if not isinstance(p, int)), "schema")
        found.append(Failure(json_path(list(error.instance_path)), rule, error.message))
        if len(found) == MAX_ERRORS:
            break
    return found
