"""Endpoint health: an endpoint that is down loses nothing and gets what it missed, in order."""

from __future__ import annotations

import json
import threading
import time

from tests.conftest import wait_until
from tests.receivers import Receiver, RecordedRequest, always, pause, sequence
from tests.api_helpers import create_endpoint, send
from tests.health.health_helpers import Switch, health, outage, statuses
from webhooks.storage.models import Alert, Delivery, Endpoint, Event, HealthChange
from webhooks.health.recovery import disable_failing
from webhooks.storage.statuses import LADDER_STATUSES


def body(request: RecordedRequest) -> dict:
    return json.loads(request.body)


def test_a_down_endpoint_goes_offline_parks_the_rest_and_gets_everything_in_order_when_back(
    client, tenant, auth, make_settings, start_worker, start_clock
):
    settings = make_settings(ladder="1s,2s,4s,8s", release_rate=40.0)
    with outage(client, auth(tenant), settings, start_worker, start_clock, 200, parked=195) as down:
        switch, receiver, endpoint, events = down.switch, down.receiver, down.endpoint, down.events
        calls_while_down = len(receiver.requests)
        # Every delivery parked, the failed ones back from their ladder tiers: each message came
        # round again, and only probes knock now (5 failures, what was in flight, and a probe).
        wait_until(lambda: statuses(endpoint["id"]) == {"parked": 200}, timeout=20)
        assert calls_while_down <= settings.offline_after_failures + settings.endpoint_max_in_flight + 2
        assert len(receiver.requests) <= calls_while_down + 2

        switch.up = True
        wait_until(lambda: statuses(endpoint["id"]) == {"delivered": 200}, timeout=40)
        wait_until(lambda: health(endpoint["id"]) == "online", timeout=5)

    arrivals = [r.headers["webhook-id"] for r in receiver.requests[calls_while_down:]]
    first_success = {}
    for webhook_id in arrivals:
        first_success.setdefault(webhook_id, len(first_success))
    assert set(first_success) == set(events)  # nothing lost
    assert sorted(first_success, key=first_success.get) == events  # in creation order
    released = [r.received_at for r in receiver.requests[-150:]]
    assert (len(released) - 1) / (released[-1] - released[0]) <= settings.release_rate * 1.15  # paced
    changes = [(c.from_state, c.to_state) for c in HealthChange.select().where(HealthChange.endpoint == endpoint["id"]).order_by(HealthChange.id)]
    assert changes == [("online", "offline"), ("offline", "recovering"), ("recovering", "online")]


def test_410_gone_disables_the_endpoint_and_later_events_park_without_calls(client, tenant, auth, settings, start_worker):
    with Receiver(always(410)) as receiver:
        endpoint = create_endpoint(client, auth(tenant), receiver.url)
        start_worker(settings)
        first = send(client, auth(tenant))
        wait_until(lambda: health(endpoint["id"]) == "disabled")
        second = send(client, auth(tenant))
        # The worker is done with the first (parked, kept for when the endpoint is enabled); the
        # second parked at ingest and was never published.
        wait_until(lambda: Delivery.get(Delivery.event == first["id"]).status == "parked")
    assert len(receiver.requests) == 1
    assert [d["status"] for d in second["deliveries"]] == ["parked"]
    assert Delivery.get(Delivery.event == first["id"]).status == "parked"  # kept for when it is enabled
    shown = client.get(f"/v1/endpoints/{endpoint['id']}", headers=auth(tenant)).get_json()
    assert shown["health"] == "disabled" and "410" in shown["disabled_reason"] and shown["parked_count"] == 2


def test_a_receiver_can_disable_itself_with_the_webhook_delivery_header(client, tenant, auth, settings, start_worker):
    with Receiver(always(200, {"webhook-delivery": "disable"})) as receiver:
        endpoint = create_endpoint(client, auth(tenant), receiver.url)
        start_worker(settings)
        event = send(client, auth(tenant))
        wait_until(lambda: health(endpoint["id"]) == "disabled")
    assert Delivery.get(Delivery.event == event["id"]).status == "delivered"


def test_retry_after_delays_the_next_attempt_and_429_does_not_count_towards_offline(
    client, tenant, auth, make_settings, start_worker
):
    settings = make_settings(ladder="1s,2s", offline_after_failures=1)
    with Receiver(sequence([(429, {"Retry-After": "3"}, b""), 200])) as receiver:
        endpoint = create_endpoint(client, auth(tenant), receiver.url)
        start_worker(settings)
        send(client, auth(tenant))
        first, second = receiver.wait_for(2, timeout=15)
    assert 2.9 <= second.received_at - first.received_at < 4.5
    assert health(endpoint["id"]) == "online"
    assert not HealthChange.select().where(HealthChange.endpoint == endpoint["id"]).exists()


def test_a_slow_endpoint_is_capped_and_does_not_slow_the_healthy_ones(client, tenant, auth, make_settings, start_worker):
    # The slow receiver holds every call until the healthy one has had all its events (or 25 s,
    # under the 30 s timeout): had the healthy deliveries queued behind the slow ones, they could
    # only arrive once a held call gave up waiting.
    settings = make_settings(delivery_timeout=30.0, endpoint_max_in_flight=4)
    in_flight, peak, gave_up, lock = [0], [0], [0], threading.Lock()
    healthy_done = threading.Event()

    def slow(request: RecordedRequest):
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        released = healthy_done.wait(25.0)
        with lock:
            in_flight[0] -= 1
            gave_up[0] += not released
        return 200, None, b"slow"

    with Receiver(slow) as slow_receiver, Receiver(always(200)) as healthy:
        create_endpoint(client, auth(tenant), slow_receiver.url, event_types=["slow"])
        create_endpoint(client, auth(tenant), healthy.url, event_types=["fast"])
        start_worker(settings)
        for _ in range(20):
            send(client, auth(tenant), event_type="slow")
        slow_receiver.wait_for(1, timeout=10)  # the slow endpoint holds calls from here on
        try:
            for _ in range(50):
                send(client, auth(tenant), event_type="fast")
            healthy.wait_for(50, timeout=20)
            with lock:
                held_while_healthy_done = gave_up[0] == 0
        finally:
            healthy_done.set()
        slow_receiver.wait_for(20, timeout=20)  # released, the slow backlog drains
    assert held_while_healthy_done, "healthy deliveries waited behind the slow endpoint's calls"
    assert 1 <= peak[0] <= 4  # never more calls at once than ENDPOINT_MAX_IN_FLIGHT


def test_rate_limit_is_honoured(client, tenant, auth, settings, start_worker):
    with Receiver(always(200)) as receiver:
        create_endpoint(client, auth(tenant), receiver.url, rate_limit=5)
        for _ in range(15):
            send(client, auth(tenant))
        start_worker(settings)  # all 15 wait in the queue: the bucket alone paces them
        requests = [request.received_at for request in receiver.wait_for(15, timeout=20)]
    # The bucket starts full (5), then refills at 5 per second: the 6th to the 15th take 1.8 s.
    # (Arrival times carry the receiver's jitter: each bound keeps 0.2 s of it.)
    assert requests[14] - requests[5] >= 1.6
    # In any stretch of L seconds at most 5 + 5 L calls: 11 calls need at least 1.2 s.
    for first in range(len(requests) - 10):
        assert requests[first + 10] - requests[first] >= 1.0


def test_an_endpoint_failing_for_the_whole_disable_period_is_disabled(client, tenant, auth, make_settings, start_worker):
    settings = make_settings(ladder="1s,2s")
    with Receiver(always(500)) as receiver:
        endpoint = create_endpoint(client, auth(tenant), receiver.url)
        start_worker(settings)
        send(client, auth(tenant))
        wait_until(lambda: Endpoint.get_by_id(endpoint["id"]).failing_since is not None)
        assert disable_failing(disable_after=3600) == 0
        time.sleep(1.1)
        assert disable_failing(disable_after=1) == 1
    assert health(endpoint["id"]) == "disabled"
    assert "no success since" in Endpoint.get_by_id(endpoint["id"]).disabled_reason


def test_one_operational_event_per_state_change_reaches_subscribed_endpoints_only(
    client, tenant, auth, make_settings, start_worker, start_clock
):
    settings = make_settings(ladder="1s,1s,1s,1s,1s", offline_after_failures=2)
    switch = Switch()
    with Receiver(switch) as flaky, Receiver(always(200)) as monitor, Receiver(always(200)) as other:
        watched = create_endpoint(client, auth(tenant), flaky.url, event_types=["order.created", "endpoint.offline"])
        create_endpoint(client, auth(tenant), monitor.url, event_types=["endpoint.offline", "endpoint.online"])
        create_endpoint(client, auth(tenant), other.url)  # every type, but operational ones must be listed
        start_worker(settings)
        start_clock(settings)
        for _ in range(3):
            send(client, auth(tenant))
        wait_until(lambda: health(watched["id"]) == "offline", timeout=15)
        (offline,) = monitor.wait_for(1, timeout=10)
        switch.up = True
        wait_until(lambda: health(watched["id"]) == "online", timeout=20)
        _, online = monitor.wait_for(2, timeout=10)
        # Nothing is left to attempt, so no state can change again: no third operational event.
        wait_until(lambda: not Delivery.select().where(Delivery.status.in_(LADDER_STATUSES)).exists(), timeout=20)
        assert len(monitor.requests) == 2
    assert body(offline)["type"] == "endpoint.offline" and body(offline)["data"]["endpoint_id"] == watched["id"]
    assert body(online)["type"] == "endpoint.online"
    assert not [r for r in other.requests if body(r)["type"].startswith("endpoint.")]
    assert not [r for r in flaky.requests if body(r)["type"].startswith("endpoint.")]  # not about itself
    assert Alert.select().where(Alert.endpoint == watched["id"]).count() == 2
    assert Event.select().where(Event.event_type.startswith("endpoint.")).count() == 2


def test_a_release_interrupted_before_its_publish_is_finished_by_the_relay_exactly_once(
    client, tenant, auth, settings, start_worker
):
    from webhooks.clock import jobs, run_due
    from webhooks.messaging.publisher import Publisher
    from webhooks.health.releaser import Releaser

    with Receiver(always(200)) as receiver:
        endpoint = create_endpoint(client, auth(tenant), receiver.url)
        client.patch(f"/v1/endpoints/{endpoint['id']}", json={"status": "disabled"}, headers=auth(tenant))
        events = [send(client, auth(tenant))["id"] for _ in range(3)]
        client.patch(f"/v1/endpoints/{endpoint['id']}", json={"status": "enabled"}, headers=auth(tenant))
        start_worker(settings)
        # The clock takes the first one out of "parked", then cannot publish (broker gone).
        broken, releaser = Publisher("amqp://guest:guest@127.0.0.1:1/%2F"), Releaser(settings.release_rate)
        time.sleep(0.1)
        assert releaser.release_parked(broken, settings.topology) == 1
        assert statuses(endpoint["id"]) == {"pending": 1, "parked": 2}
        # Later clock passes (the relay, then the paced release) finish the job.
        publisher = Publisher(settings.amqp_url)
        schedule = jobs(settings, publisher)
        time.sleep(settings.relay_grace)
        deadline = time.monotonic() + 20
        while statuses(endpoint["id"]) != {"delivered": 3} and time.monotonic() < deadline:
            run_due(schedule)
            releaser.release_parked(publisher, settings.topology)
            time.sleep(0.02)
        publisher.close()
        time.sleep(0.3)
    assert [r.headers["webhook-id"] for r in receiver.requests] == events


def test_an_outage_sends_exactly_one_email_when_it_starts_and_one_when_it_ends(
    client, tenant, auth, make_settings, start_worker, start_clock
):
    from tests.smtp_server import SmtpServer

    smtp = SmtpServer()
    smtp.start()
    try:
        settings = make_settings(ladder="1s,1s,1s,1s,1s", offline_after_failures=2, smtp_url=smtp.url())
        switch = Switch()
        with Receiver(switch) as receiver:
            endpoint = create_endpoint(client, auth(tenant), receiver.url, contact_email="ops@customer.example")
            start_worker(settings)
            start_clock(settings)
            for _ in range(4):
                send(client, auth(tenant))
            wait_until(lambda: health(endpoint["id"]) == "offline", timeout=15)
            wait_until(lambda: len(smtp.sent_to("ops@customer.example")) == 1, timeout=10)
            switch.up = True
            wait_until(lambda: health(endpoint["id"]) == "online", timeout=20)
            wait_until(lambda: len(smtp.sent_to("ops@customer.example")) == 2, timeout=10)
            time.sleep(2.5)  # another email pass: nothing more to send
    finally:
        smtp.stop()
    offline, online = smtp.sent_to("ops@customer.example")
    assert "offline" in offline["Subject"] and receiver.url in offline.get_body(("plain",)).get_content()
    assert "online" in online["Subject"] or "back" in online["Subject"]
    assert len(smtp.inbox.messages) == 2


def test_recover_on_an_offline_endpoint_keeps_its_parked_deliveries_parked_and_try_now_brings_them_in_order(
    client, tenant, auth, make_settings, start_worker, start_clock
):
    # Probes every 60 s: nothing but the test's "try now" brings the endpoint back.
    settings = make_settings(ladder="1s,2s", release_rate=40.0, probe_interval="60s")
    with outage(client, auth(tenant), settings, start_worker, start_clock, 20, parked=20) as down:  # the probe's too
        switch, receiver, endpoint, events = down.switch, down.receiver, down.endpoint, down.events
        parked = {d.id: d.attempts for d in Delivery.select().where(Delivery.status == "parked")}

        recovered = client.post(f"/v1/endpoints/{endpoint['id']}/recover",
                                json={"since": "2000-01-01T00:00:00Z"}, headers=auth(tenant))

        assert recovered.status_code == 202
        assert recovered.get_json() == {"queued": 0, "parked": 20}
        assert {d.id: d.attempts for d in Delivery.select().where(Delivery.status == "parked")} == parked
        shown = client.get(f"/v1/endpoints/{endpoint['id']}", headers=auth(tenant)).get_json()
        assert shown["health"] == "offline" and shown["parked_count"] == 20
        calls_before_back = len(receiver.requests)

        switch.up = True
        tried = client.post(f"/v1/endpoints/{endpoint['id']}/probe", headers=auth(tenant))
        assert tried.status_code == 202
        wait_until(lambda: statuses(endpoint["id"]) == {"delivered": 20}, timeout=30)

    arrivals = [r.headers["webhook-id"] for r in receiver.requests[calls_before_back:]]
    assert arrivals == events  # each once, in creation order
    probe = Delivery.get(Delivery.event == events[0])
    assert tried.get_json() == {"endpoint_id": endpoint["id"], "delivery_id": probe.id,
                                "attempt_no": parked[probe.id] + 1}
    after = {d.id: (d.attempts, d.manual_attempts) for d in Delivery.select().where(Delivery.id.in_(list(parked)))}
    # Every delivery kept its ladder attempts: the probe is outside the ladder, like a resend.
    assert after == {delivery_id: (attempts + 1, 1 if delivery_id == probe.id else 0)
                     for delivery_id, attempts in parked.items()}
