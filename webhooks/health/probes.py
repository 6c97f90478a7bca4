"""Probes: how an offline endpoint is tried again, soon and at a bounded interval, so a return is noticed soon.

While an endpoint is offline every delivery of it parks, and nothing of it climbs the
ladder. The clock probes it instead (``probe_due``): a first probe ``PROBE_INTERVAL``'s
first interval (5 s) after it went offline, then at an interval that grows with the
outage (a quarter of its age so far: a receiver back after a minute is noticed within
seconds) up to the longest (3 minutes: after a day away, within 3 minutes).

A probe is an attempt of the endpoint's oldest undelivered delivery, outside the ladder
(trigger ``probe``, counted with resends in ``manual_attempts``): a failed one leaves the
delivery parked with every ladder attempt it had; a successful one delivers it (the
oldest, so what the endpoint missed starts arriving in order at once) and brings the
endpoint back, ``recovering``, which starts the paced release (``releaser``). The probe's
message is published as a resend's is, with no outbox mark: a probe lost on the way is
made good by the next one. ``take_probe(…, due_only=False)`` is the same probe at once,
for "try now" (``webhooks.actions.probe_now``).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from peewee import fn

from webhooks.errors import InvalidInput
from webhooks.config import ProbeInterval
from webhooks.health import presence
from webhooks.health.recovery import live, oldest_of
from webhooks.messaging.messages import DeliveryMessage
from webhooks.messaging.outbox import message_for, publish_messages
from webhooks.messaging.publisher import Publisher
from webhooks.messaging.topology import Topology
from webhooks.storage.db import locking, retrying, write
from webhooks.storage.models import Endpoint
from webhooks.storage.statuses import PROBE_STATUSES
from webhooks.storage.timeutil import utcnow

log = logging.getLogger(__name__)

#: The wait before the next probe is this share of how long the endpoint has been offline
#: (within ``PROBE_INTERVAL``'s bounds): the wait after the receiver is back stays a small
#: share of the outage, and a long outage costs a probe every few minutes, not every few seconds.
GROWTH = 0.25


class NotProbed(InvalidInput):
    """The endpoint was not probed; the message says why, and what to do instead."""


def wait_before_next(interval: ProbeInterval, offline_for: float) -> float:
    """Seconds from a probe to the next, ``offline_for`` seconds into the outage."""
    return min(interval.longest, max(interval.first, offline_for * GROWTH))


def _due(interval: ProbeInterval, now: datetime) -> Any:
    """An offline endpoint whose probe is due: at ``next_probe_at``, or the first interval after it went offline."""
    first_due = now - timedelta(seconds=interval.first)
    return (Endpoint.next_probe_at <= now) | (Endpoint.next_probe_at.is_null() & (Endpoint.offline_since <= first_due))


def due_at(endpoint: Endpoint, interval: ProbeInterval) -> datetime | None:
    """When the clock probes ``endpoint`` next (None: it is not offline, or is disabled or deleted)."""
    if why_not_probed(endpoint) is not None:
        return None
    if endpoint.next_probe_at is not None:
        return endpoint.next_probe_at
    return (endpoint.offline_since or utcnow()) + timedelta(seconds=interval.first)


def why_not_probed(endpoint: Endpoint) -> str | None:
    """Why ``endpoint`` cannot be probed (None: it can), in words for whoever asked."""
    if endpoint.deleted_at is not None:
        return f"endpoint {endpoint.id} was deleted"
    if endpoint.disabled:
        return f"endpoint {endpoint.id} is disabled: enable it, and what it missed is released in order"
    if endpoint.health == presence.RECOVERING:
        return f"endpoint {endpoint.id} is back already: what it missed is being released, in order"
    if endpoint.health != presence.OFFLINE:
        return (f"endpoint {endpoint.id} is online: only an offline endpoint is probed "
                "(resend a delivery to try it again now)")
    return None


@retrying
def take_probe(endpoint_id: str, interval: ProbeInterval, *, due_only: bool) -> DeliveryMessage:
    """Choose the probe of an offline endpoint and set when the next one is due, in one transaction
    on the locked endpoint row; the probe's message, to publish. ``due_only``: only if a probe is
    due (the clock's); else at once (try now). NotProbed says why there is none."""
    with write():
        endpoint = locking(Endpoint.select().where(Endpoint.id == endpoint_id)).first()
        if endpoint is None:
            raise NotProbed(f"no endpoint {endpoint_id}")
        reason = why_not_probed(endpoint)
        if reason is not None:
            raise NotProbed(reason)
        now, due = utcnow(), due_at(endpoint, interval)
        if due_only and due is not None and due > now:
            raise NotProbed(f"endpoint {endpoint_id} is not due for a probe before {due}")
        target = oldest_of(endpoint_id, PROBE_STATUSES)  # the oldest: what it missed arrives in order
        if target is None and not due_only:
            raise NotProbed(f"endpoint {endpoint_id} has no delivery to probe it with: it is probed with the "
                            "next event's delivery, at most PROBE_INTERVAL's longest interval after that event")
        offline_for = (now - (endpoint.offline_since or now)).total_seconds()
        next_at = now + timedelta(seconds=wait_before_next(interval, offline_for))
        Endpoint.update(next_probe_at=next_at, probe_delivery_id=target.id if target else None).where(
            Endpoint.id == endpoint_id
        ).execute()
    if target is None:
        raise NotProbed(f"endpoint {endpoint_id} has no delivery to probe it with")
    return message_for(target, target.event, trigger="probe")


#: At most this many endpoints are probed per pass of the clock's job (the most overdue first),
#: so that a thousand endpoints going offline at once do not hold up the clock's other jobs.
PROBES_PER_PASS = 500


@retrying
def probe_due(publisher: Publisher, topology: Topology, interval: ProbeInterval) -> int:
    """The clock's job: probe the offline endpoints whose probe is due; returns how many were probed."""
    now = utcnow()
    due = (
        Endpoint.select(Endpoint.id)
        .where(live(presence.OFFLINE) & _due(interval, now))
        .order_by(fn.COALESCE(Endpoint.next_probe_at, Endpoint.offline_since), Endpoint.id)
        .limit(PROBES_PER_PASS)
    )
    messages: list[DeliveryMessage] = []
    for (endpoint_id,) in list(due.tuples()):
        try:
            messages.append(take_probe(endpoint_id, interval, due_only=True))
        except NotProbed:
            continue  # changed meanwhile, or nothing to probe with (its next probe is set)
    confirmed = publish_messages(publisher, topology, messages) if messages else 0
    for message in messages[:confirmed]:
        log.info("probe endpoint=%s delivery=%s attempt=%d", message.endpoint_id, message.delivery_id, message.attempt)
    if confirmed < len(messages):
        log.warning("%d probe(s) not confirmed by the broker; those endpoints are probed again at their next interval",
                    len(messages) - confirmed)
    return confirmed
