"""A payload's JSON is the standard library's compact JSON, byte for byte, however it is made.

Every stored payload was written by ``json.dumps(payload, separators=(",", ":"))``; a resend
or recovery reads it back and encodes it again, and must send the bytes the first attempt
sent. ``payload_json`` lets orjson encode when its output is certainly the same.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from webhooks.storage.payload_json import EncodedPayload, PayloadJSON, payload_json

#: Numbers where the two encoders part ways (tiny floats, integers past 64 bits), and text with every kind of character.
NUMBER = st.one_of(st.integers(), st.integers(min_value=2**63 - 3, max_value=2**64 + 3), st.floats(allow_nan=False,
                   allow_infinity=False), st.sampled_from([1e-05, 1.5e-07, 0.0001, 1e16, 1e22, -0.0, 5e-324, 1e300]))
TEXT = st.one_of(st.text(), st.text(st.characters(max_codepoint=127)), st.sampled_from(["\x7f", "é", "\ud800", "e-5",
                                                                                       "0.00001", "😀"]))
VALUE = st.recursive(st.none() | st.booleans() | NUMBER | TEXT,
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4), max_leaves=12)


def stdlib(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


@settings(max_examples=500)
@given(st.dictionaries(TEXT, VALUE, max_size=6))
def test_the_bytes_are_the_standard_librarys_for_any_payload(payload: dict[str, Any]) -> None:
    assert payload_json(payload) == stdlib(payload)
    assert payload_json(EncodedPayload(payload)) == stdlib(payload)


def test_a_payload_read_back_encodes_to_the_text_it_was_stored_as() -> None:
    for payload in ({"name": "Zoë", "amount": 1.5e-07, "big": 2**70}, {"order": {"id": "ord_1", "lines": [1, 2.5]}}):
        stored = payload_json(payload).decode()
        assert payload_json(json.loads(stored)) == stored.encode()


def test_keys_keep_the_order_they_came_in() -> None:
    assert payload_json({"b": 1, "a": {"d": 2, "c": 3}}) == b'{"b":1,"a":{"d":2,"c":3}}'


def test_an_encoded_payload_is_the_dict_and_carries_its_json_made_once() -> None:
    encoded = EncodedPayload({"b": 1, "a": [True, None]})
    assert encoded == {"b": 1, "a": [True, None]}
    assert isinstance(encoded.json, PayloadJSON) and encoded.json == b'{"b":1,"a":[true,null]}'
    assert payload_json(encoded) is encoded.json


def test_payload_json_bytes_pass_through_as_they_are() -> None:
    text = PayloadJSON(b'{"z":1,"a":2}')
    assert payload_json(text) is text
