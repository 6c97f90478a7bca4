"""What the portal's event log reads: the tenant's events newest first (by ``seq``, off the
``(tenant, seq)`` and ``(tenant, event_type, seq)`` indexes), narrowed by the console's delivery
filter (a status or an endpoint: events with such a delivery), and how each was delivered."""

from __future__ import annotations

from collections import Counter

import peewee
from peewee import fn

from webhooks.console.queries import DeliveryFilter
from webhooks.storage.models import Delivery, Event


def events_matching(tenant_id: str, narrowed: DeliveryFilter) -> peewee.ModelSelect:
    """The tenant's events as the filter narrows them (type, time; a delivery's status or endpoint)."""
    query = Event.select().where(Event.tenant == tenant_id)
    if narrowed.event_type:
        query = query.where(Event.event_type == narrowed.event_type)
    if narrowed.since:
        query = query.where(Event.created_at >= narrowed.since)
    if narrowed.until:
        query = query.where(Event.created_at < narrowed.until)
    if narrowed.statuses or narrowed.endpoint_id:
        deliveries = Delivery.select(Delivery.id).where(Delivery.event == Event.id)
        if narrowed.statuses:
            deliveries = deliveries.where(Delivery.status.in_(narrowed.statuses))
        if narrowed.endpoint_id:
            deliveries = deliveries.where(Delivery.endpoint == narrowed.endpoint_id)
        query = query.where(fn.EXISTS(deliveries))
    return query


def delivery_counts(event_ids: list[str]) -> dict[str, Counter[str]]:
    """Each event's deliveries by status."""
    counts: dict[str, Counter[str]] = {event_id: Counter() for event_id in event_ids}
    if event_ids:
        query = (Delivery.select(Delivery.event, Delivery.status, fn.COUNT(Delivery.id))
                 .where(Delivery.event.in_(event_ids)).group_by(Delivery.event, Delivery.status).tuples())
        for event_id, status, count in query:
            counts[event_id][str(status)] = count
    return counts
