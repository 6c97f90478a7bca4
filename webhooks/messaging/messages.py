"""The AMQP message of one delivery attempt: ids, the attempt number and the event payload.

Never a secret or a URL: endpoint settings are read at send time, so a PATCH, delete
or rotation applies from the next attempt. The attempt counter lives in our own
header (RabbitMQ 4 ignores client-set ``x-*`` headers).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Mapping

#: Header names (ours, not ``x-``: RabbitMQ reserves those).
ATTEMPT_HEADER = "attempt"
TRIGGER_HEADER = "trigger"
#: Unix time in whole milliseconds (AMQP tables have no portable float type).
NOT_BEFORE_HEADER = "not_before_ms"

#: Why an attempt is made: the automatic schedule or a person's request.
TRIGGERS = ("ladder", "resend", "recover")


class PoisonMessage(ValueError):
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
    payload: dict[str, Any]
    attempt: int = 1
    trigger: str = "ladder"
    #: Unix time before which no attempt may be made (from ``Retry-After``).
    not_before: float | None = None

    def encode(self) -> tuple[bytes, dict[str, Any]]:
        """The message body and headers."""
        body = json.dumps(
            {
                "delivery_id": self.delivery_id,
                "event_id": self.event_id,
                "endpoint_id": self.endpoint_id,
                "tenant_id": self.tenant_id,
                "event_type": self.event_type,
                "event_created_at": self.event_created_at,
                "payload": self.payload,
            },
            separators=(",", ":"),
        ).encode()
        headers: dict[str, Any] = {ATTEMPT_HEADER: self.attempt, TRIGGER_HEADER: self.trigger}
        if self.not_before is not None:
            headers[NOT_BEFORE_HEADER] = int(self.not_before * 1000)
        return body, headers

    @classmethod
    def decode(cls, body: bytes, headers: Mapping[str, Any] | None) -> "DeliveryMessage":
        """Parse a message; anything malformed raises PoisonMessage."""
        headers = headers or {}
        try:
            data = json.loads(body)
            attempt = int(headers.get(ATTEMPT_HEADER, 1))
            trigger = str(headers.get(TRIGGER_HEADER, "ladder"))
            raw_not_before = headers.get(NOT_BEFORE_HEADER)
            message = cls(
                delivery_id=str(data["delivery_id"]),
                event_id=str(data["event_id"]),
                endpoint_id=str(data["endpoint_id"]),
                tenant_id=str(data["tenant_id"]),
                event_type=str(data["event_type"]),
                event_created_at=str(data["event_created_at"]),
                payload=data["payload"],
                attempt=attempt,
                trigger=trigger,
                not_before=None if raw_not_before is None else int(raw_not_before) / 1000,
            )
        except (ValueError, KeyError, TypeError) as error:
            raise PoisonMessage(f"malformed delivery message: {error}") from error
        if attempt < 1 or trigger not in TRIGGERS or not isinstance(message.payload, dict):
            raise PoisonMessage("malformed delivery message: bad attempt, trigger or payload")
        return message

    def next(self, **changes: Any) -> "DeliveryMessage":
        """A copy with ``changes`` (the next attempt, a new ``not_before``)."""
        return replace(self, **changes)
