"""The signed request sent to an endpoint (Standard Webhooks ``v1`` or ``v1a``), built at send time.

Shared by the worker and the catch-up client so both send byte-identical requests.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

from webhooks.delivery.signing import signature_header
from webhooks.storage.payload_json import PayloadJSON, payload_json

#: Sent as ``user-agent`` so receivers can tell our calls apart in their logs.
USER_AGENT = "webhooks/1.0 (+Standard Webhooks)"


@dataclass(frozen=True)
class OutgoingRequest:
    body: bytes
    headers: dict[str, str]


def body_bytes(event_type: str, timestamp: str, payload: dict[str, Any] | PayloadJSON) -> bytes:
    """``{"type", "timestamp", "data"}``: the exact bytes that are signed and sent.

    The one place a body is made, for every attempt (first, ladder, resend, recover) and
    for ``flask listen``. ``payload`` keeps the key order the event was received with (the
    stored ``Event.payload`` text, never re-sorted), so every attempt carries the same bytes:
    those of ``json.dumps({"type": …, "timestamp": …, "data": payload}, separators=(",", ":"))``,
    with the payload's JSON spliced in as it is rather than encoded again.
    """
    return b"".join((b'{"type":', json.dumps(event_type).encode(), b',"timestamp":', json.dumps(timestamp).encode(),
                     b',"data":', payload_json(payload), b"}"))


def active_secrets(secret: str, previous: str | None, previous_until: datetime | None, now: datetime) -> list[str]:
    """The current key, plus the previous one while its rotation overlap lasts (either scheme)."""
    if previous and previous_until is not None and previous_until > now:
        return [secret, previous]
    return [secret]


def build_request(
    msg_id: str, event_type: str, timestamp: str, payload: dict[str, Any] | PayloadJSON, secrets: Sequence[str],
    unix_now: int,
) -> OutgoingRequest:
    """Body and headers of one attempt, signed with each key by its own scheme (``whsec_`` v1, ``whsk_`` v1a).

    ``webhook-id`` is the event id on every retry and endpoint.
    """
    body = body_bytes(event_type, timestamp, payload)
    headers = {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "webhook-id": msg_id,
        "webhook-timestamp": str(unix_now),
        "webhook-signature": signature_header(secrets, msg_id, unix_now, body),
    }
    return OutgoingRequest(body, headers)
