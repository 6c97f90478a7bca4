"""End to end: API -> RabbitMQ -> worker -> a real local receiver, through the ladder."""

from __future__ import annotations


from standardwebhooks import Webhook

from tests.conftest import wait_until
from tests.receivers import Receiver, always, sequence
from webhooks.models import Attempt, Delivery


def register(client, headers, url: str, **fields):
    response = client.post("/v1/endpoints", json={"url": url, **fields}, headers=headers)
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def send(client, headers, event_type: str = "order.created", payload=None, **extra):
    response = client.post(
        "/v1/events", json={"event_type": event_type, "payload": payload or {"n": 1}, **extra}, headers=headers
    )
    assert response.status_code == 202, response.get_json()
    return response.get_json()


def test_event_is_delivered_on_first_try_signed_for_standardwebhooks(client, tenant, auth, settings, start_worker):
    with Receiver(always(200)) as receiver:
        endpoint = register(client, auth(tenant), receiver.url + "/hook")
        start_worker(settings)
        event = send(client, auth(tenant), payload={"order": 42})
        (request,) = receiver.wait_for(1, timeout=10)
        verified = Webhook(endpoint["secret"]).verify(request.body, dict(request.headers))
        assert verified == {"type": "order.created", "timestamp": event["created_at"], "data": {"order": 42}}
        assert request.headers["webhook-id"] == event["id"]
        delivery = wait_until(lambda: Delivery.get_or_none(Delivery.event == event["id"], Delivery.status == "delivered"))
        assert delivery.attempts == 1
        (attempt,) = Attempt.select().where(Attempt.delivery == delivery.id)
        assert attempt.response_status == 200
        assert attempt.request_headers["webhook-id"] == event["id"]


def test_failed_attempts_wait_each_tier_of_the_ladder_then_deliver(client, tenant, auth, settings, start_worker):
    with Receiver(sequence([(500, None, b"boom"), (503, None, b""), (200, None, b"ok")])) as receiver:
        register(client, auth(tenant), receiver.url)
        start_worker(settings)
        event = send(client, auth(tenant))
        requests = receiver.wait_for(3, timeout=15)
        gaps = [b.received_at - a.received_at for a, b in zip(requests, requests[1:])]
        # ladder 1s,2s: the first failure waits 1 s, the second 2 s
        assert 0.9 <= gaps[0] < 2.0, gaps
        assert 1.9 <= gaps[1] < 3.2, gaps
        delivery = wait_until(lambda: Delivery.get_or_none(Delivery.event == event["id"], Delivery.status == "delivered"))
        attempts = list(Attempt.select().where(Attempt.delivery == delivery.id).order_by(Attempt.attempt_no))
        assert [a.response_status for a in attempts] == [500, 503, 200]
        assert [a.outcome for a in attempts] == ["retrying", "retrying", "delivered"]
        assert attempts[0].response_body == "boom"
        assert attempts[0].next_attempt_at is not None
        assert len({r.headers["webhook-id"] for r in requests}) == 1
