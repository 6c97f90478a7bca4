"""Deliveries to claim and outcomes to record, for the tests of claims, records and their indexes."""

from __future__ import annotations

from types import SimpleNamespace

from tests.api_helpers import HOOK_URL
from webhooks.delivery.records import Outcome
from webhooks.delivery.signing import generate_secret
from webhooks.ingest.accept import store_event
from webhooks.messaging.messages import DeliveryMessage
from webhooks.messaging.outbox import message_for
from webhooks.storage.ids import new_id
from webhooks.storage.models import Endpoint, Tenant
from webhooks.storage.statuses import DeliveryStatus
from webhooks.storage.timeutil import utcnow


def messages_of(tenant: SimpleNamespace, count: int) -> list[DeliveryMessage]:
    """``count`` events for one endpoint of ``tenant``: the first attempt of each delivery."""
    Endpoint.create(id=new_id("ep"), tenant=tenant.id, url=HOOK_URL, secret=generate_secret())
    model = Tenant.get_by_id(tenant.id)
    accepted = [store_event(model, "order.created", {"n": n}, None) for n in range(count)]
    return [message_for(a.deliveries[0], a.event) for a in accepted]


def delivered_outcome(message: DeliveryMessage) -> Outcome:
    return outcome_of(message, 200)


def failed_outcome(message: DeliveryMessage) -> Outcome:
    """A 500: the delivery goes on retrying."""
    return outcome_of(message, 500)


def unstorable_outcome(message: DeliveryMessage) -> Outcome:
    """A success whose attempt row breaks a constraint (its ``url`` may not be NULL)."""
    outcome = delivered_outcome(message)
    return Outcome(**{**outcome.__dict__, "attempt_fields": {**outcome.attempt_fields, "url": None}})


def outcome_of(message: DeliveryMessage, code: int) -> Outcome:
    now, delivered = utcnow(), code < 300
    return Outcome(
        attempt_id=new_id("att"),
        status=DeliveryStatus.DELIVERED if delivered else DeliveryStatus.RETRYING,
        next_attempt_at=None if delivered else now,
        attempt_fields={
            "started_at": now, "duration_ms": 3.0, "url": HOOK_URL, "request_headers": {"webhook-id": message.event_id},
            "response_status": code, "response_headers": None, "response_body": None, "error_class": None,
            "error": None if delivered else f"HTTP {code}",
        },
        last_status_code=code,
        last_error=None if delivered else f"HTTP {code}",
    )


#: Lease of every claim here (seconds).
LEASE = 30.0
