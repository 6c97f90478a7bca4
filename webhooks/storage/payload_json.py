"""An event's payload as JSON text: encoded once, at ingestion, and carried as those bytes.

At ingestion the payload becomes an ``EncodedPayload``: still the dict (the ``202`` echoes
it), carrying its JSON, which is stored (``PayloadField``), published and spliced into
every attempt's body (``webhooks.delivery.outgoing.body_bytes``) as the same bytes.
Receivers hash and dedupe on a body, so every attempt must carry those bytes, and a
payload read back from the database and encoded again (a resend, a recovery, the
sweeper) must come out as it went in.

The bytes are exactly ``json.dumps(payload, separators=(",", ":"))``'s: keys in the order
they came, non-ASCII escaped, Python's float notation. That is what every stored payload
was written as, so any of them encodes again to its stored text. ``payload_json`` lets
orjson (in C, about twenty times faster on a 1 KB payload) encode it and keeps that output
whenever it is certainly the same: pure ASCII without ``DEL``, and no number below 1e-4
(where Python writes ``1e-05`` and orjson ``0.00001`` or ``1e-5``). Anything else, and
whatever orjson refuses (an integer beyond 64 bits, a lone surrogate), the standard
library encodes. ``tests/storage/test_payload_json.py`` holds the two to the same bytes.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

#: In orjson's output, what the standard library might write otherwise: a small number's
#: exponent or run of zeros (also matched inside strings; those just take the slow path).
_MAY_DIFFER = re.compile(rb"e-|0\.0000")


class PayloadJSON(bytes):
    """An event payload as compact JSON text (``payload_json``): carried and spliced as it is,
    never parsed again on the way to the receiver."""


class EncodedPayload(dict[str, Any]):
    """A payload dict that carries its ``payload_json`` bytes (``json``), encoded once (so it is
    never changed after)."""

    __slots__ = ("json",)

    def __init__(self, payload: dict[str, Any]) -> None:
        super().__init__(payload)
        self.json = _encode(payload)


def payload_json(payload: "dict[str, Any] | PayloadJSON") -> PayloadJSON:
    """``payload`` as ``json.dumps(payload, separators=(",", ":"))`` would encode it, as bytes."""
    if isinstance(payload, PayloadJSON):
        return payload
    if isinstance(payload, EncodedPayload):
        return payload.json
    return _encode(payload)


def _encode(payload: dict[str, Any]) -> PayloadJSON:
    try:
        fast = orjson.dumps(payload)
    except orjson.JSONEncodeError:
        pass
    else:
        if fast.isascii() and b"\x7f" not in fast and _MAY_DIFFER.search(fast) is None:
            return PayloadJSON(fast)
    return PayloadJSON(json.dumps(payload, separators=(",", ":")).encode())
