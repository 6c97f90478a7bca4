"""The AMQP message of one delivery attempt: ids, the attempt number and the event payload.

Never a secret or a URL: endpoint settings are read at send time, so a PATCH, delete
or rotation applies from the next attempt. The attempt counter lives in our own
header (RabbitMQ 4 ignores client-set ``x-*`` headers).

The body is compact JSON with the payload as its last member. A worker reads the ids
in front of it and keeps the payload as the bytes it came in (``PayloadJSON``): the
request body is spliced around them, so a payload is parsed and encoded once, at
ingestion, not on every attempt. A body in any other shape is parsed in full.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Mapping

from webhooks.errors import InvalidInput
from webhooks.storage.payload_json import PayloadJSON, payload_json

#: Header names (ours, not ``x-``: RabbitMQ reserves those).
ATTEMPT_HEADER = "attempt"
TRIGGER_HEADER = "trigger"
#: Unix time in whole milliseconds (AMQP tables have no portable float type).
NOT_BEFORE_HEADER = "not_before_ms"
#: The W3C trace context of the request (or action) that made the delivery, when tracing is on:
#: every attempt's span joins that trace, whichever tier it comes back from.
TRACEPARENT_HEADER = "traceparent"
#: A longer header is not a ``traceparent`` (version 00 is 55 characters) and is ignored.
MAX_TRACEPARENT = 128

#: Why an attempt is made: the automatic schedule, a person's request, or a probe of an
#: offline endpoint (the clock's, or a person's "try now").
TRIGGERS = ("ladder", "resend", "recover", "probe")

#: What separates the ids from the payload in a body ``encode`` made.
_PAYLOAD_MEMBER = b',"payload":'


class PoisonMessage(InvalidInput):
    """A message this worker cannot understand; it goes to the dead-letter queue once."""


@dataclass(frozen=True)
class DeliveryMessage:
    delivery_id: str
    event_id: str
    endpoint_id: str
    tenant_id: str
    event_type: str
    #: The event's creation time, ISO 8601 (the ``timestamp`` field of the body sent).
    event_created_at: str
    #: The event's payload: a dict, or its JSON as a decoded message carries it.
    payload: "dict[str, Any] | PayloadJSON"
    attempt: int = 1
    trigger: str = "ladder"
    #: Unix time before which no attempt may be made (from ``Retry-After``).
    not_before: float | None = None
    #: W3C ``traceparent`` of the span the attempts belong under (None: tracing off, or none known).
    traceparent: str | None = None

    def encode(self) -> tuple[bytes, dict[str, Any]]:
        """The message body and headers."""
        ids = json.dumps(
            {
                "delivery_id": self.delivery_id,
                "event_id": self.event_id,
                "endpoint_id": self.endpoint_id,
                "tenant_id": self.tenant_id,
                "event_type": self.event_type,
                "event_created_at": self.event_created_at,
            },
            separators=(",", ":"),
        ).encode()
        body = b"".join((ids[:-1], _PAYLOAD_MEMBER, payload_json(self.payload), b"}"))
        headers: dict[str, Any] = {ATTEMPT_HEADER: self.attempt, TRIGGER_HEADER: self.trigger}
        if self.not_before is not None:
            headers[NOT_BEFORE_HEADER] = int(self.not_before * 1000)
        if self.traceparent is not None:
            headers[TRACEPARENT_HEADER] = self.traceparent
        return body, headers

    @classmethod
    def decode(cls, body: bytes, headers: Mapping[str, Any] | None) -> "DeliveryMessage":
        """Parse a message; anything malformed raises PoisonMessage."""
        headers = headers or {}
        try:
            data, payload = _split(body)
            attempt = int(headers.get(ATTEMPT_HEADER, 1))
            trigger = str(headers.get(TRIGGER_HEADER, "ladder"))
            raw_not_before = headers.get(NOT_BEFORE_HEADER)
            traceparent = headers.get(TRACEPARENT_HEADER)
            if isinstance(traceparent, bytes):
                traceparent = traceparent.decode("ascii", "replace")
            message = cls(
                delivery_id=str(data["delivery_id"]),
                event_id=str(data["event_id"]),
                endpoint_id=str(data["endpoint_id"]),
                tenant_id=str(data["tenant_id"]),
                event_type=str(data["event_type"]),
                event_created_at=str(data["event_created_at"]),
                payload=payload,
                attempt=attempt,
                trigger=trigger,
                not_before=None if raw_not_before is None else int(raw_not_before) / 1000,
                traceparent=traceparent if isinstance(traceparent, str) and len(traceparent) <= MAX_TRACEPARENT else None,
            )
        except (ValueError, KeyError, TypeError) as error:
            raise PoisonMessage(f"malformed delivery message: {error}") from error
        if attempt < 1 or trigger not in TRIGGERS:
            raise PoisonMessage("malformed delivery message: bad attempt, trigger or payload")
        return message

    def next(self, **changes: Any) -> "DeliveryMessage":
        """A copy with ``changes`` (the next attempt, a new ``not_before``)."""
        return replace(self, **changes)


def _split(body: bytes) -> tuple[dict[str, Any], PayloadJSON]:
    """The ids of a message body, and its payload as JSON bytes.

    A body ``encode`` made has the payload last, after the first ``,"payload":`` (inside a
    JSON string a quote is escaped, so an id or event type cannot hold that sequence):
    only the ids in front are parsed. Anything else is parsed in full and checked.
    """
    head, found, rest = body.partition(_PAYLOAD_MEMBER)
    if found and head.startswith(b"{") and rest.startswith(b"{") and rest.endswith(b"}}"):
        try:
            data = json.loads(head + b"}")
        except ValueError:
            data = None
        if isinstance(data, dict) and "payload" not in data:
            return data, PayloadJSON(rest[:-1])
    data = json.loads(body)
    if not isinstance(data, dict) or not isinstance(data.get("payload"), dict):
        raise ValueError("the body is not an object with an object payload")
    return data, payload_json(data["payload"])
