"""Every attempt of an event carries the same bytes, whatever made it: the first attempt, a
ladder retry, a recover, a resend and ``flask listen`` (receivers hash and dedupe on them)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import wait_until
from tests.receivers import Receiver, sequence
from tests.api_helpers import create_endpoint
from webhooks.storage.models import Delivery

#: The payload as the service received it, keys in this order.
RAW_EVENT = b'{"event_type": "order.created", "payload": {"order_id": 42, "amount": 1999}}'


def test_first_attempt_retry_recover_resend_and_listen_send_byte_identical_bodies_in_the_order_received(
    app, client, tenant, auth, make_settings, start_worker, serve_api, tmp_path: Path
) -> None:
    settings = make_settings(ladder="1s")
    with Receiver(sequence([500, 500, 204, 204, 204])) as receiver:
        endpoint = create_endpoint(client, auth(tenant), receiver.url + "/hook")
        start_worker(settings)
        accepted = client.post("/v1/events", data=RAW_EVENT, headers={**auth(tenant), "content-type": "application/json"})
        assert accepted.status_code == 202, accepted.get_json()
        delivery_id = accepted.get_json()["deliveries"][0]["id"]
        wait_until(lambda: Delivery.get_by_id(delivery_id).status == "failed", timeout=15)  # first attempt, one retry

        recovered = client.post(f"/v1/endpoints/{endpoint['id']}/recover", json={"since": "2000-01-01T00:00:00Z"},
                                headers=auth(tenant))
        assert recovered.get_json()["queued"] == 1
        wait_until(lambda: Delivery.get_by_id(delivery_id).status == "delivered", timeout=10)
        resent = client.post(f"/v1/deliveries/{delivery_id}/resend", headers=auth(tenant))
        assert resent.status_code == 202
        wait_until(lambda: Delivery.get_by_id(delivery_id).attempts == 4, timeout=10)
        listened = app.test_cli_runner().invoke(args=[
            "listen", "--forward-to", receiver.url + "/hook", "--api-url", serve_api().url, "--api-key", tenant.api_key,
            "--secret", endpoint["secret"], "--cursor-file", str(tmp_path / "cursor"), "--no-follow",
        ])
        assert listened.exit_code == 0, listened.output
        requests = receiver.wait_for(5)

    bodies = [request.body for request in requests]
    assert b'"data":{"order_id":42,"amount":1999}' in bodies[0]
    assert bodies == [bodies[0]] * 5
    assert len({request.headers["webhook-id"] for request in requests}) == 1
