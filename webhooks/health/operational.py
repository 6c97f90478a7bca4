"""Operational events: each alert row becomes one ``endpoint.*`` or ``delivery.exhausted`` event.

Delivered through the same signed pipeline, only to the tenant's endpoints that list
the type explicitly, never to the endpoint the event is about. The alert is marked in
the transaction that stores the event, so each state change raises exactly one event.
"""

from __future__ import annotations

from webhooks.storage.db import retrying, write
from webhooks.ingest.accept import store_event
from webhooks.storage.models import Alert, Tenant
from webhooks.messaging.outbox import enqueue, message_for
from webhooks.messaging.publisher import Publisher
from webhooks.storage.timeutil import isoformat, utcnow
from webhooks.messaging.topology import Topology
from webhooks.storage.statuses import DeliveryStatus

#: Alerts turned into events per clock pass.
BATCH = 100


@retrying
def raise_pending(publisher: Publisher, topology: Topology) -> int:
    """Turn unraised alerts into events and publish them; returns how many were raised."""
    raised = 0
    for alert in Alert.select().where(Alert.raised_at.is_null()).order_by(Alert.id).limit(BATCH):
        with write():
            if not Alert.update(raised_at=utcnow()).where((Alert.id == alert.id) & Alert.raised_at.is_null()).execute():
                continue  # another clock took it
            payload = {**alert.data, "occurred_at": isoformat(alert.created_at)}
            accepted = store_event(Tenant.get_by_id(alert.tenant_id), alert.kind, payload, None, exclude_endpoint=alert.endpoint_id)
            Alert.update(event_id=accepted.event.id).where(Alert.id == alert.id).execute()
        enqueue(publisher, topology, [message_for(d, accepted.event) for d in accepted.deliveries if d.status == DeliveryStatus.PENDING])
        raised += 1
    return raised
