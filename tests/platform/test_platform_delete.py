"""DELETE /v1/tenants/<id or uid>: a soft delete, safe while deliveries are in flight; the clock purges later."""

from __future__ import annotations

import threading
from datetime import timedelta
from types import SimpleNamespace
from typing import Any, Callable

from flask.testing import FlaskClient

from tests.api_helpers import HOOK_URL, make_attempt, row_counts
from tests.conftest import wait_until
from tests.receivers import Receiver, RecordedRequest
from webhooks import tenants
from webhooks.ingest import auth_keys
from webhooks.storage.models import ApiKey, Attempt, Delivery, Endpoint, Event, Tenant
from webhooks.storage.timeutil import utcnow

EVENT = {"event_type": "order.created", "payload": {"order": 1}}


def customer_with_history(client: FlaskClient, platform: dict[str, str], url: str = HOOK_URL) -> dict[str, Any]:
    """A tenant (uid ``cus_1``) with a key of its own, an endpoint and an event pending delivery."""
    tenant = client.post("/v1/tenants", json={"name": "Customer", "uid": "cus_1"}, headers=platform).json
    key = client.post("/v1/tenants/cus_1/api-keys", json={"name": "own"}, headers=platform).json["api_key"]
    client.post("/v1/tenants/cus_1/endpoints", json={"url": url}, headers=platform)
    event = client.post("/v1/tenants/cus_1/events", json=EVENT, headers=platform).json
    return {**tenant, "headers": {"Authorization": f"Bearer {key}"}, "event": event}


def test_delete_stops_keys_refuses_events_cancels_deliveries_and_frees_name_and_uid(
    client: FlaskClient, platform: dict[str, str]
) -> None:
    tenant = customer_with_history(client, platform)

    assert client.delete("/v1/tenants/cus_1", headers=platform).status_code == 204

    assert client.get("/v1/events", headers=tenant["headers"]).status_code == 401
    assert client.get(f"/v1/tenants/{tenant['id']}", headers=platform).status_code == 404
    assert client.post(f"/v1/tenants/{tenant['id']}/events", json=EVENT, headers=platform).status_code == 404
    assert client.delete("/v1/tenants/cus_1", headers=platform).status_code == 404
    assert [t["id"] for t in client.get("/v1/tenants", headers=platform).json["data"]] == []
    assert {d.status for d in Delivery.select()} == {"cancelled"}
    assert all(e.deleted_at is not None for e in Endpoint.select())
    again = client.post("/v1/tenants", json={"name": "customer", "uid": "cus_1"}, headers=platform)
    assert again.status_code == 201 and again.json["id"] != tenant["id"]
    assert Event.select().count() == 1  # kept until the clock purges it


def test_a_key_still_cached_by_another_process_gets_a_404_and_writes_nothing(
    client: FlaskClient, platform: dict[str, str]
) -> None:
    tenant = customer_with_history(client, platform)
    key = tenant["headers"]["Authorization"].removeprefix("Bearer ")
    row = Tenant.get_by_id(tenant["id"])

    tenants.delete_tenant(row)
    secret_hash = ApiKey.get_by_id(key.partition(".")[0]).secret_hash
    auth_keys.key_cache.put(key.partition(".")[0], secret_hash, row)  # what another process still holds
    before = row_counts()
    response = client.post("/v1/events", json=EVENT, headers=tenant["headers"])

    assert response.status_code == 404 and response.json["message"] == "tenant not found (deleted)"
    assert row_counts() == before


def test_the_clock_purges_a_deleted_tenant_after_purge_after_and_nothing_of_another(
    client: FlaskClient, platform: dict[str, str], tenant: SimpleNamespace, headers: dict[str, str]
) -> None:
    client.post("/v1/endpoints", json={"url": HOOK_URL}, headers=headers)
    client.post("/v1/events", json=EVENT, headers=headers)
    gone = customer_with_history(client, platform)
    make_attempt(gone["event"]["deliveries"][0]["id"], 1)
    client.delete("/v1/tenants/cus_1", headers=platform)
    kept = row_counts()

    tenants.purge_deleted(utcnow() + tenants.PURGE_AFTER - timedelta(minutes=1))
    assert row_counts() == kept

    while tenants.purge_deleted(utcnow() + tenants.PURGE_AFTER, batch=1):
        pass
    assert Tenant.get_or_none(Tenant.id == gone["id"]) is None
    for model in (Event, Delivery, Attempt, Endpoint, ApiKey):
        assert model.select().where(model.tenant == gone["id"]).count() == 0, model
    assert [t.id for t in Tenant.select()] == [tenant.id]
    assert Event.select().count() == 1 and Endpoint.select().count() == 1


def test_an_attempt_in_flight_at_the_delete_ends_is_recorded_and_nothing_more_is_attempted(
    client: FlaskClient, platform: dict[str, str], settings: Any, start_worker: Callable[..., Any]
) -> None:
    held, release = threading.Event(), threading.Event()

    def respond(_request: RecordedRequest) -> tuple[int, None, bytes]:
        held.set()
        release.wait(10)
        return 500, None, b"down"  # a failure: the ladder (1s, 2s) would try again

    with Receiver(respond) as receiver:
        tenant = customer_with_history(client, platform, url=receiver.url)
        start_worker(settings)
        assert held.wait(10)

        assert client.delete(f"/v1/tenants/{tenant['id']}", headers=platform).status_code == 204
        release.set()

        delivery_id = tenant["event"]["deliveries"][0]["id"]
        wait_until(lambda: Attempt.select().where(Attempt.delivery == delivery_id).count() == 1)
        # The retry comes back from its waiting tier and is dropped there: no second call.
        wait_until(lambda: Delivery.get_by_id(delivery_id).status == "cancelled"
                   and Delivery.get_by_id(delivery_id).lease_until is None, timeout=15)
        (attempt,) = Attempt.select().where(Attempt.delivery == delivery_id)
        assert attempt.response_status == 500
        assert len(receiver.requests) == 1
