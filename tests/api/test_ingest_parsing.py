"""The parser's fast path for flat schemas: it accepts exactly what marshmallow accepts, and loads it the same.

``POST /v1/events`` skips marshmallow's machinery for a valid body and ``Idempotency-Key``
header; anything else falls through to marshmallow, so every error reads as before.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from flask.testing import FlaskClient
from hypothesis import given, settings
from hypothesis import strategies as st
from marshmallow import ValidationError
from werkzeug.datastructures import Headers

from tests.api_helpers import post_event
from webhooks.api import events as events_api
from webhooks.api import parsing
from webhooks.api.parsing import MAX_JSON_DEPTH, fast_load, flat_fields, loads_strict, nests_deeper_than
from webhooks.api.endpoint_schemas import EndpointCreateSchema
from webhooks.api.schemas import EventCreateSchema, EventListArgsSchema, IdempotencyHeaderSchema

TEXT = st.one_of(
    st.sampled_from(["order.created", "a", "x" * 128, "x" * 129, "", "bad type", "endpoint.offline", "a\x00b", "\ud800"]),
    st.text(max_size=20),
)
JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
BODY = st.dictionaries(
    st.sampled_from(["event_type", "payload", "idempotency_key", "extra"]),
    JSON_VALUE | st.dictionaries(st.text(max_size=5), JSON_VALUE, max_size=3),
    max_size=4,
)


def marshmallow_load(schema: Any, raw: Any) -> dict[str, Any] | None:
    try:
        return schema.load(raw)
    except ValidationError:
        return None


def standard_library(data: bytes) -> Any:
    """``loads_strict`` as it was, on the standard library alone (``RefusedJson`` and ``JSONDecodeError`` alike)."""
    return json.loads(data.decode("utf-8"), parse_constant=parsing._reject_constant, parse_float=parsing._finite_float)


DOCUMENT_TEXT = st.one_of(
    st.builds(lambda v: json.dumps(v, ensure_ascii=False).encode("utf-8", "surrogatepass"), JSON_VALUE),
    st.builds(lambda v: json.dumps(v).encode(), JSON_VALUE),
    st.sampled_from([b"NaN", b"[Infinity]", b"1e999", b"-1e400", b"\xef\xbb\xbf{}", b'"\\ud800"', b"123456789012345678901234567890",
                     b"[18446744073709551616, -9223372036854775809]", b'{"a":1,"a":2}', b"\xff", b"01", b"1.", b".5", b"+1",
                     b' \t\n[1] ', b"\x0b1", b'"a\x01"', b"[1,]", b"{}x", b"", b"0.1e-7", b"-0"]),
    st.binary(max_size=12),
)


@settings(max_examples=1500)
@given(DOCUMENT_TEXT)
def test_a_body_reads_as_the_standard_library_reads_it_or_is_refused_as_it_refuses_it(data: bytes) -> None:
    try:
        expected: Any = ("read", repr(standard_library(data)))
    except (ValueError, RecursionError):
        expected = "refused"
    try:
        got: Any = ("read", repr(loads_strict(data)))
    except ValueError:
        got = "refused"
    assert got == expected


@settings(max_examples=400, deadline=None)
@given(BODY)
def test_the_event_body_fast_path_agrees_with_marshmallow_on_every_body(body: dict[str, Any]) -> None:
    schema = EventCreateSchema()
    flat = flat_fields(schema)
    assert flat is not None

    assert fast_load(flat, body, allow_unknown=False) == marshmallow_load(schema, body)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["Idempotency-Key", "idempotency-key", "X-Other"]),
                       TEXT.filter(lambda value: "\n" not in value and "\r" not in value), max_size=3))
def test_the_idempotency_header_fast_path_agrees_with_marshmallow(raw: dict[str, str]) -> None:
    schema = IdempotencyHeaderSchema()
    flat = flat_fields(schema)
    assert flat is not None
    headers = Headers(list(raw.items()))
    as_webargs_sees_them = {"Idempotency-Key": headers["Idempotency-Key"]} if "Idempotency-Key" in headers else {}

    assert fast_load(flat, headers, allow_unknown=True) == marshmallow_load(schema, as_webargs_sees_them)


@pytest.mark.parametrize("schema", [EndpointCreateSchema(), EventListArgsSchema()])
def test_schemas_with_other_fields_always_take_marshmallows_path(schema: Any) -> None:
    assert flat_fields(schema) is None


def test_a_valid_event_never_reaches_marshmallow(
    client: FlaskClient, headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    view_schemas = [s for s in _argument_schemas() if isinstance(s, (EventCreateSchema, IdempotencyHeaderSchema))]
    assert len(view_schemas) == 2
    for schema in view_schemas:
        monkeypatch.setattr(schema, "load", _refuse)

    response = post_event(client, {**headers, "Idempotency-Key": "k-1"}, payload={"n": 1})

    assert response.status_code == 202, response.json
    assert response.json["payload"] == {"n": 1}


def test_an_invalid_event_gets_marshmallows_errors(client: FlaskClient, headers: dict[str, str]) -> None:
    response = client.post("/v1/events", json={"event_type": "bad type", "payload": [], "x": 1}, headers=headers)

    assert response.status_code == 422
    assert set(response.json["errors"]["json"]) == {"event_type", "payload", "x"}


def test_a_body_with_few_brackets_skips_the_depth_walk_but_a_deep_one_is_still_refused() -> None:
    shallow = b'{"a": [1, 2, {"b": "[[[["}]}'
    assert loads_strict(shallow) == {"a": [1, 2, {"b": "[[[["}]}

    deep = b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1)
    with pytest.raises(ValueError, match="nested deeper"):
        loads_strict(deep)
    brackets_in_strings = b'{"s": "' + b"[" * 200 + b'"}'
    assert loads_strict(brackets_in_strings) == {"s": "[" * 200}


def json_depth(value: Any) -> int:
    """How deeply arrays and objects nest in a parsed value (the reference for ``nests_deeper_than``)."""
    if isinstance(value, dict):
        return 1 + max(map(json_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(json_depth, value), default=0)
    return 0


DEEP_VALUE = st.recursive(
    st.none() | st.integers() | st.text(alphabet='[]{}"\\ab', max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\a', max_size=4), inner,
                                                                max_size=3),
    max_leaves=40,
)


@settings(max_examples=500, deadline=None)
@given(DEEP_VALUE, st.integers(0, 12), st.booleans())
def test_the_bracket_scan_measures_depth_exactly_whatever_the_strings_hold(value: Any, limit: int,
                                                                          spaced: bool) -> None:
    text = json.dumps(value, ensure_ascii=False, indent=1 if spaced else None).encode()

    assert nests_deeper_than(text, limit) == (json_depth(value) > limit)


def _refuse(*_args: Any, **_kwargs: Any) -> Any:
    raise AssertionError("marshmallow was asked to load a valid event")


def _argument_schemas() -> list[Any]:
    """The schema instances the POST /v1/events view parses with."""
    found = []
    view = events_api.Events.post
    for parameter in view._apidoc["arguments"]["parameters"]:  # type: ignore[attr-defined]
        found.append(parameter["schema"])
    return found
