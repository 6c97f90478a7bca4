"""A receiver's ``v1a`` check as docs/security.md shows it: ed25519 with the ``whpk_`` public key alone.

The official ``standardwebhooks`` 1.1.0 and ``svix`` Python libraries verify only ``v1``; this uses nothing of ours.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

#: Seconds a timestamp may be off, as the official libraries allow.
TOLERANCE = 5 * 60


class V1aVerificationError(Exception):
    """No ``v1a`` signature in the request verifies with the public key, or it is too old or too new."""


def verify_v1a(public_key: str, body: bytes, headers: Mapping[str, str], tolerance: int = TOLERANCE) -> Any:
    """The parsed body if one ``v1a`` signature verifies with ``public_key`` (``whpk_…``); raises otherwise."""
    headers = {name.lower(): value for name, value in headers.items()}
    try:
        msg_id, timestamp = headers["webhook-id"], headers["webhook-timestamp"]
        signatures = headers["webhook-signature"].split(" ")
    except KeyError as missing:
        raise V1aVerificationError(f"missing header {missing}") from None
    if not timestamp.isdigit() or abs(time.time() - int(timestamp)) > tolerance:
        raise V1aVerificationError("timestamp missing or out of tolerance")
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key.removeprefix("whpk_"), validate=True))
    content = f"{msg_id}.{timestamp}.".encode() + body
    for versioned in signatures:
        version, _, signature = versioned.partition(",")
        if version != "v1a":
            continue
        try:
            key.verify(base64.b64decode(signature, validate=True), content)
        except (InvalidSignature, binascii.Error, ValueError):
            continue
        return json.loads(body)
    raise V1aVerificationError("no matching v1a signature")
