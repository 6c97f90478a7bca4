"""On PostgreSQL the worker's batch statements lock deliveries in id order, as the outbox mark
does, so that two of them never wait on each other in a circle ("deadlock detected", found
only after ``deadlock_timeout``: a second's stall for every delivery in the batch)."""

from __future__ import annotations

import threading
from typing import Any, Callable

import psycopg2
import pytest

from tests.conftest import wait_until
from tests.api_helpers import create_endpoint, send
from webhooks.delivery import backlog
from webhooks.delivery.claims import ClaimState, claim_many
from webhooks.messaging.messages import DeliveryMessage
from webhooks.storage.models import Delivery


def two_deliveries(client: Any, tenant: Any, auth: Any) -> list[Delivery]:
    """Two deliveries, the one with the lower id stored after the other (an update moves a row)."""
    create_endpoint(client, auth(tenant), "http://127.0.0.1:9/hook")
    for n in range(2):
        send(client, auth(tenant), payload={"n": n})
    wait_until(lambda: not Delivery.select().where(Delivery.enqueued_at.is_null()).exists())
    first, second = Delivery.select().order_by(Delivery.id)
    Delivery.update(updated_at=first.updated_at).where(Delivery.id == first.id).execute()
    return [first, second]


def message_of(delivery: Delivery) -> DeliveryMessage:
    return DeliveryMessage(delivery.id, delivery.event_id, delivery.endpoint_id, delivery.tenant_id, "order.created",
                           "", {}, attempt=delivery.attempts + 1)


@pytest.mark.postgresql  # SQLite writes one transaction at a time
@pytest.mark.parametrize("statement", ["claim", "spill"])
def test_a_batch_waiting_for_a_delivery_holds_none_of_those_after_it(
    client: Any, tenant: Any, auth: Any, settings: Any, statement: str
) -> None:
    first, second = two_deliveries(client, tenant, auth)
    messages = [message_of(second), message_of(first)]
    run: Callable[[], Any] = {
        "claim": lambda: claim_many(messages, 30.0),
        "spill": lambda: backlog.spill(messages),
    }[statement]
    other = psycopg2.connect(settings.database_url)  # another transaction, as another worker's
    try:
        cursor = other.cursor()
        cursor.execute("SELECT id FROM delivery WHERE id = %s FOR UPDATE", [first.id])
        results: list[Any] = []
        batch = threading.Thread(target=lambda: results.append(run()))
        batch.start()
        wait_until(lambda: _waiting_for_a_lock(cursor), timeout=10)

        cursor.execute("SELECT id FROM delivery WHERE id = %s FOR UPDATE NOWAIT", [second.id])

        other.rollback()
        batch.join(timeout=10)
    finally:
        other.close()
    assert not batch.is_alive()
    if statement == "claim":
        assert [claim.state for claim in results[0]] == [ClaimState.CLAIMED] * 2
    else:
        assert results[0] == [True, True]


def _waiting_for_a_lock(cursor: Any) -> bool:
    """Is some other session of this database blocked on a lock? (The statistics views keep one
    snapshot per transaction unless told to drop it.)"""
    cursor.execute("SELECT pg_stat_clear_snapshot()")
    cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                   "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()")
    return cursor.fetchone()[0] > 0
