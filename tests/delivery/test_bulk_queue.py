"""A flood's own queue: a tenant far over its share is published to the bulk queue, which the
workers consume beside the primary queue, so another tenant's message is never read behind it."""

from __future__ import annotations

import threading
from typing import Any

from flask import Flask

from tests.api_helpers import create_endpoint, send
from tests.conftest import queue_messages, wait_until
from tests.receivers import Receiver, RecordedRequest, Response, always
from webhooks.config import Settings
from webhooks.messaging.messages import DeliveryMessage
from webhooks.messaging.shares import RecentShares
from webhooks.storage.models import Delivery

#: A's events (one delivery each), and the share above which A's go to the bulk queue.
FLOOD, SHARE = 40, 5


def _tenants_in(queue: str) -> list[str]:
    return [DeliveryMessage.decode(body, headers).tenant_id for body, headers in queue_messages(queue)]


def test_a_tenant_over_its_share_is_published_to_the_bulk_queue_and_another_tenant_to_the_primary(
    client: Any, tenant: Any, other_tenant: Any, auth: Any, app: Flask, settings: Settings
) -> None:
    enqueuer = app.extensions["webhooks.enqueuer"]
    enqueuer.shares = RecentShares(bulk_after=SHARE)
    create_endpoint(client, auth(tenant), "http://127.0.0.1:9/a")
    create_endpoint(client, auth(other_tenant), "http://127.0.0.1:9/b")

    for n in range(FLOOD):
        send(client, auth(tenant), payload={"n": n})
    send(client, auth(other_tenant))
    assert enqueuer.wait_idle(10)

    bulk, primary = _tenants_in(settings.topology.bulk), _tenants_in(settings.topology.primary)
    # Judged when published: at most the first SHARE (published before the count passed it) go to the primary queue.
    assert set(bulk) == {tenant.id} and len(bulk) >= FLOOD - SHARE
    assert primary.count(other_tenant.id) == 1 and len(bulk) + len(primary) == FLOOD + 1


def test_another_tenant_s_delivery_is_made_while_the_flood_waits_in_the_bulk_queue_and_the_flood_arrives_after(
    client: Any, tenant: Any, other_tenant: Any, auth: Any, app: Flask, settings: Settings, start_worker: Any
) -> None:
    release = threading.Event()

    def held(request: RecordedRequest) -> Response:
        release.wait(30)  # A's calls do not return until B's delivery is made
        return 200, None, b""

    enqueuer = app.extensions["webhooks.enqueuer"]
    enqueuer.shares = RecentShares(bulk_after=SHARE)
    with Receiver(held) as flood, Receiver(always(204)) as quiet:
        create_endpoint(client, auth(tenant), flood.url)
        create_endpoint(client, auth(other_tenant), quiet.url)
        for n in range(FLOOD):
            send(client, auth(tenant), payload={"n": n})
        assert enqueuer.wait_idle(10)
        start_worker(settings)
        flood.wait_for(1, timeout=10)  # A's calls are under way and held
        send(client, auth(other_tenant))

        quiet.wait_for(1, timeout=10)
        made = Delivery.select().where(Delivery.tenant_id == tenant.id, Delivery.status == "delivered").count()
        assert made == 0, "A's backlog had not drained when B's delivery was made"
        release.set()
        flood.wait_for(FLOOD, timeout=30)  # the bulk queue is consumed too: every one of A's arrives
        wait_until(lambda: Delivery.select().where(Delivery.status == "delivered").count() == FLOOD + 1, timeout=30)
