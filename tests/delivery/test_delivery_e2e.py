"""End to end: API -> RabbitMQ -> worker -> a real local receiver, through the ladder."""

from __future__ import annotations


from standardwebhooks import Webhook

from tests.api_helpers import create_endpoint, send
from tests.conftest import wait_until
from tests.receivers import Receiver, always, sequence
from webhooks.storage.models import Attempt, Delivery


def test_event_is_delivered_on_first_try_signed_for_standardwebhooks(client, tenant, auth, settings, start_worker):
    with Receiver(always(200)) as receiver:
        endpoint = create_endpoint(client, auth(tenant), receiver.url + "/hook")
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
        create_endpoint(client, auth(tenant), receiver.url)
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


def test_a_failed_resend_of_a_retrying_delivery_keeps_its_place_on_the_ladder(client, tenant, auth, make_settings, start_worker):
    settings = make_settings(ladder="30s,60s")
    with Receiver(always(500)) as receiver:
        create_endpoint(client, auth(tenant), receiver.url)
        start_worker(settings)
        event = send(client, auth(tenant))
        delivery = wait_until(lambda: Delivery.get_or_none(Delivery.event == event["id"], Delivery.status == "retrying"))
        scheduled = delivery.next_attempt_at

        response = client.post(f"/v1/deliveries/{delivery.id}/resend", headers=auth(tenant))
        assert response.status_code == 202
        receiver.wait_for(2, timeout=10)
        after = wait_until(lambda: Delivery.get_or_none(Delivery.id == delivery.id, Delivery.attempts == 2))

    assert after.status == "retrying" and after.manual_attempts == 1
    assert after.next_attempt_at == scheduled, "the resend did not push the next attempt down the ladder"
    attempts = list(Attempt.select().where(Attempt.delivery == delivery.id).order_by(Attempt.attempt_no))
    assert [(a.trigger, a.outcome) for a in attempts] == [("ladder", "retrying"), ("resend", "retrying")]
    assert attempts[1].next_attempt_at == scheduled


def test_an_attempt_says_what_went_wrong_in_the_words_of_its_delivery(client, tenant, auth, settings, start_worker):
    with Receiver(always(500)) as receiver:
        create_endpoint(client, auth(tenant), receiver.url)
        start_worker(settings)
        event = send(client, auth(tenant))
        receiver.wait_for(1, timeout=10)
        delivery = wait_until(lambda: Delivery.get_or_none(Delivery.event == event["id"], Delivery.attempts >= 1))
    (attempt,) = Attempt.select().where((Attempt.delivery == delivery.id) & (Attempt.attempt_no == 1))
    assert attempt.error == delivery.last_error == "HTTP 500"
    shown = client.get(f"/v1/events/{event['id']}/attempts", headers=auth(tenant)).get_json()["data"][-1]
    assert shown["error"] == "HTTP 500"


def test_a_response_body_with_nul_bytes_is_stored_and_holds_up_no_other_delivery(
        client, tenant, auth, settings, start_worker):
    # PostgreSQL's text cannot hold NUL: the attempt keeps the body with U+FFFD in its place, as it
    # does for bytes that are not UTF-8, and the batch of records it shares with others goes through.
    with Receiver(always(200, body=b"ok\x00tail")) as odd, Receiver(always(200, body=b"fine")) as plain:
        create_endpoint(client, auth(tenant), odd.url + "/odd")
        create_endpoint(client, auth(tenant), plain.url + "/plain")
        events = [send(client, auth(tenant), payload={"n": n}) for n in range(5)]
        start_worker(settings)
        ids = [event["id"] for event in events]
        wait_until(lambda: Delivery.select().where(Delivery.event.in_(ids), Delivery.status == "delivered").count() == 10)
        bodies = {a.response_body for a in Attempt.select().where(Attempt.event.in_(ids))}
        assert bodies == {"ok\ufffdtail", "fine"}
        assert Attempt.select().where(Attempt.event.in_(ids)).count() == 10
