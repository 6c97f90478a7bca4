"""Fallback while an endpoint is away: each event it misses is also told, once, to its ``fallback_url``.

An endpoint may name a ``fallback_url`` (any kind of destination). While the endpoint is
offline or disabled, every delivery of it parks, to be released in order when it is back
(``webhooks.health``). Each event whose delivery parks then is *also* given one delivery of
its own, marked ``fallback``: to the same endpoint row (its tenant, its secret, its attempt
log), but sent to the ``fallback_url`` through the ladder like any delivery. The parked
delivery is untouched: the fallback copy replaces nothing.

The copy is made where a delivery parks, in the transaction that parks it:

- at fan-out, when the endpoint is already offline or disabled (``webhooks.ingest.plan``);
- at its claim, when a delivery that was pending or retrying finds its endpoint offline or
  disabled (``webhooks.delivery.claims``);
- when a 410 disables the endpoint and parks the delivery (``webhooks.delivery.records``).

A delivery parked because its endpoint is *recovering* (back, releasing what it missed) makes
no copy: it is not missed, only queued behind the others. "Once" is the partial unique index
of migration 0026 on ``(endpoint_id, event_id) WHERE fallback``: a delivery parked, released
and parked again in a second outage finds its copy made and makes none.

A fallback delivery never parks and never speaks for its endpoint's presence: its outcome
moves neither ``health`` nor the failure count, a 410 from the fallback fails it (the endpoint
stays enabled), and the release, probes and ``recover`` leave fallback deliveries alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from webhooks.messaging.messages import DeliveryMessage
from webhooks.storage.ids import new_ids
from webhooks.storage.models import Delivery
from webhooks.storage.statuses import OFFLINE, DeliveryStatus


def tells_fallback(disabled: Any, health: str) -> bool:
    """Whether an endpoint in this state misses what it parks (offline or disabled; recovering is back)."""
    return bool(disabled) or health == OFFLINE


def new_copy(delivery_id: str, tenant_id: str, event_id: str, endpoint_id: str, now: datetime) -> dict[str, Any]:
    """The row of a fallback copy, pending its first attempt (the columns of a delivery made at fan-out)."""
    return {
        "id": delivery_id, "tenant": tenant_id, "event": event_id, "endpoint": endpoint_id,
        "status": DeliveryStatus.PENDING, "attempts": 0, "next_attempt_at": now, "created_at": now, "updated_at": now,
        "fallback": True,
    }


def copy_parked(parked: Sequence[DeliveryMessage], now: datetime) -> dict[str, DeliveryMessage]:
    """Fallback copies of the events of ``parked`` (messages of deliveries that just parked, to
    endpoints that name a fallback), in the caller's transaction; by parked delivery id, the
    first attempt's message of each copy made. An event told to the fallback already makes none.

    The copies are pending with no outbox mark: whoever publishes their messages marks them,
    and if nobody does the relay publishes them.
    """
    wanted = {(message.endpoint_id, message.event_id): message for message in parked}
    if not wanted:
        return {}
    made = {
        (endpoint_id, event_id)
        for endpoint_id, event_id in Delivery.select(Delivery.endpoint_id, Delivery.event_id)
        .where(Delivery.fallback & Delivery.event.in_(sorted({event for _, event in wanted}))
               & Delivery.endpoint.in_(sorted({endpoint for endpoint, _ in wanted})))
        .tuples()
    }
    todo = [message for key, message in wanted.items() if key not in made]
    if not todo:
        return {}
    ids = new_ids("dlv", len(todo))
    rows = [new_copy(delivery_id, m.tenant_id, m.event_id, m.endpoint_id, now) for delivery_id, m in zip(ids, todo)]
    Delivery.insert_many(rows).on_conflict_ignore().execute()  # a copy made meanwhile wins: still once
    inserted = {delivery_id for (delivery_id,) in Delivery.select(Delivery.id).where(Delivery.id.in_(ids)).tuples()}
    return {
        message.delivery_id: message.next(delivery_id=delivery_id, attempt=1, trigger="ladder", not_before=None)
        for delivery_id, message in zip(ids, todo)
        if delivery_id in inserted
    }
