"""Probes of an offline endpoint: at a bounded interval, outside the ladder, and at once on request.

Most tests here run the clock's probe job (``probes.probe_due``) and a worker's attempt
(the real claim, decision and record, with the receiver's answer given by the test) on a
simulated clock, so hours and days of outage take a moment. The last ones run the real
worker, clock and a receiver.
"""

from __future__ import annotations

import random
import statistics
import time
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import wait_until
from tests.api_helpers import create_endpoint, send
from tests.health.health_helpers import RecordingPublisher, outage, statuses
from webhooks.clock import PROBE_EVERY_SECONDS
from webhooks.config import ProbeInterval, Settings
from webhooks.delivery.attempt import attempt_fields
from webhooks.delivery.claims import ClaimState, claim_many
from webhooks.delivery.classify import classify
from webhooks.delivery.decide import after_attempt
from webhooks.delivery.http_result import HttpResult
from webhooks.delivery.records import Outcome, record_many
from webhooks.delivery.signing import generate_secret
from webhooks.health import probes
from webhooks.ingest.accept import store_event
from webhooks.messaging.messages import DeliveryMessage
from webhooks.messaging.outbox import message_for
from webhooks.storage.ids import new_id
from webhooks.storage.models import Delivery, Endpoint, Tenant
from webhooks.storage.timeutil import isoformat, utcnow

#: The clock's probe job runs this often (``webhooks.clock.PROBE_EVERY_SECONDS``).
JOB_EVERY = PROBE_EVERY_SECONDS

#: ``run_probes`` makes the attempts of the probes from this long before the receiver is back.
ATTEMPTED_BEFORE_RETURN = timedelta(minutes=10)


class SimClock:
    """The time the probe job, the claims and the records read; moved only by the test."""

    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 12, 0, 0)

    def __call__(self) -> datetime:
        return self.now

    def at(self, when: datetime) -> None:
        assert when >= self.now, "a simulated clock never goes back"
        self.now = when


@pytest.fixture
def sim(monkeypatch: pytest.MonkeyPatch) -> SimClock:
    clock = SimClock()
    for module in ("health.probes", "delivery.claims", "delivery.records", "ingest.accept"):
        monkeypatch.setattr(f"webhooks.{module}.utcnow", clock)
    return clock


def attempt(message: DeliveryMessage, settings: Settings, answer: int, now: datetime) -> str | None:
    """What a worker does with ``message`` when the receiver answers ``answer`` at ``now``: the
    delivery's new status (None: the claim made no call, e.g. it parked the delivery)."""
    (claim,) = claim_many([message], 30.0)
    if claim.state is not ClaimState.CLAIMED:
        return None
    result = HttpResult(answer, {}, b"", 2.0, None, None)
    verdict = classify(answer, {})
    step = after_attempt(message, verdict, claim.prior_status or "pending", claim.manual_attempts, claim.due_at,
                         settings.ladder, settings.topology, now)
    outcome = Outcome(
        attempt_id=new_id("att"), status=step.status, next_attempt_at=step.next_attempt_at,
        attempt_fields=attempt_fields(now, "http://127.0.0.1:9/hook", {}, result, verdict),
        last_status_code=answer, last_error=None if verdict.delivered else verdict.summary,
        manual_attempts=step.manual_attempts,
    )
    assert record_many([(message, outcome)], settings.offline_after_failures) == [True]
    return step.status


def only(deliveries: list[Delivery]) -> Delivery:
    (delivery,) = deliveries  # one endpoint at a time: each trial deletes its own
    return delivery


def offline_endpoint(tenant: SimpleNamespace, settings: Settings, sim: SimClock) -> tuple[str, list[str]]:
    """An endpoint whose receiver went down now: the first attempts of its ``OFFLINE_AFTER_FAILURES``
    deliveries fail, it goes offline, and each delivery's next ladder attempt, back from its
    waiting queue, parks it. (endpoint id, delivery ids oldest first)"""
    endpoint = Endpoint.create(id=new_id("ep"), tenant=tenant.id, url="http://127.0.0.1:9/hook", secret=generate_secret())
    model = Tenant.get_by_id(tenant.id)
    count = settings.offline_after_failures
    deliveries = [only(store_event(model, "order.created", {"n": n}, None).deliveries) for n in range(count)]
    for delivery in deliveries:
        assert attempt(message_for(delivery, delivery.event), settings, 503, sim.now) == "retrying"
    assert Endpoint.get_by_id(endpoint.id).health == "offline"
    for delivery in deliveries:  # no ladder attempt is made now: each parks its delivery
        assert attempt(message_for(Delivery.get_by_id(delivery.id), delivery.event), settings, 503, sim.now) is None
    assert statuses(endpoint.id) == {"parked": count}
    return endpoint.id, [delivery.id for delivery in deliveries]


def next_tick(after: datetime, phase: float) -> datetime:
    """The first run of the clock's probe job at or after ``after`` (the job runs every second, at ``phase``)."""
    epoch, every = datetime(2026, 1, 1) + timedelta(seconds=phase), timedelta(seconds=JOB_EVERY)
    return epoch + -(-(after - epoch) // every) * every  # whole microseconds: no rounding to the tick after


def run_probes(endpoint_id: str, settings: Settings, sim: SimClock, back_at: datetime, phase: float,
               probe_times: list[datetime] | None = None) -> tuple[datetime, str]:
    """Run the clock's probe job, tick by tick, with a receiver that answers 503 before ``back_at``
    and 204 from then on, until a probe succeeds: (when, the delivery it delivered).

    Only the ticks around a probe's due time are run (nothing happens in between: the tick just
    before is run too and must probe nothing). Probes more than ``ATTEMPTED_BEFORE_RETURN`` before
    ``back_at`` are published and never attempted, as if lost on the way (the schedule is the
    clock's alone, and a long outage's failed attempts would only make the test slow).
    """
    publisher = RecordingPublisher()
    while True:
        due = probes.due_at(Endpoint.get_by_id(endpoint_id), settings.probe_interval)
        assert due is not None, "an offline endpoint always has its next probe"
        tick = next_tick(max(due, sim.now), phase)
        if tick - timedelta(seconds=JOB_EVERY) > sim.now:
            sim.at(tick - timedelta(seconds=JOB_EVERY))
            assert probes.probe_due(publisher, settings.topology, settings.probe_interval) == 0
        sim.at(tick)
        assert probes.probe_due(publisher, settings.topology, settings.probe_interval) == 1
        message = publisher.messages[-1]
        assert message.trigger == "probe"
        if probe_times is not None:
            probe_times.append(sim.now)
        if sim.now >= back_at - ATTEMPTED_BEFORE_RETURN and (
            attempt(message, settings, 204 if sim.now >= back_at else 503, sim.now) == "delivered"
        ):
            return sim.now, message.delivery_id
        sim.at(sim.now + timedelta(milliseconds=2))


# -- the rule -----------------------------------------------------------------------------


def test_the_wait_between_probes_grows_with_the_outage_within_probe_interval() -> None:
    interval = ProbeInterval.parse("5s,3m")

    waits = [probes.wait_before_next(interval, offline_for) for offline_for in (0, 10, 30, 60, 300, 3600, 86400)]

    assert waits == [5.0, 5.0, 7.5, 15.0, 75.0, 180.0, 180.0]
    assert probes.wait_before_next(ProbeInterval.parse("30s"), 86400) == 30.0  # one duration: a fixed interval


@pytest.mark.parametrize("text, error", [
    ("5s,3m,1h", "one duration or two"), ("3m,5s", "the first no longer than the longest"),
    ("0s", "above zero"), ("soon", "invalid duration 'soon'"),
])
def test_probe_interval_names_what_is_wrong_with_it(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        Settings.from_env({"PROBE_INTERVAL": text})
    assert Settings.from_env({}).probe_interval == ProbeInterval(5.0, 180.0)


# -- the clock's probes, on a simulated clock --------------------------------------------------


def test_an_offline_endpoint_is_probed_at_the_growing_interval_not_at_its_ladder_tiers(
    tenant: SimpleNamespace, make_settings: Any, sim: SimClock
) -> None:
    settings = make_settings(ladder="5s,5m,30m,2h,5h", probe_interval="5s,3m")
    endpoint_id, _ = offline_endpoint(tenant, settings, sim)
    offline_at = sim.now
    times: list[datetime] = []

    run_probes(endpoint_id, settings, sim, back_at=offline_at + timedelta(hours=1), phase=0.0, probe_times=times)

    ages = [(time - offline_at).total_seconds() for time in times]
    gaps = [later - earlier for earlier, later in zip(ages, ages[1:])]
    assert 5.0 <= ages[0] <= 6.0 and ages[-1] >= 3600
    # 5 s at first, then a quarter of the outage so far, at most 3 minutes (to the job's next run):
    # about 30 probes in the hour, where the ladder would have made 4.
    expected = [min(180.0, max(5.0, earlier / 4)) for earlier in ages]
    assert all(wait <= gap <= wait + JOB_EVERY + 0.01 for wait, gap in zip(expected, gaps)), list(zip(expected, gaps))
    assert max(gaps) <= 180.0 + JOB_EVERY + 0.01 and 25 <= len(times) <= 40


def test_probes_do_not_use_up_the_ladder_and_the_first_parked_delivery_arrives_with_the_probe(
    tenant: SimpleNamespace, make_settings: Any, sim: SimClock
) -> None:
    settings = make_settings(ladder="1s,2s", probe_interval="1s")  # three ladder attempts in all
    endpoint_id, deliveries = offline_endpoint(tenant, settings, sim)
    oldest = Delivery.get_by_id(deliveries[0])

    arrived_at, delivered = run_probes(endpoint_id, settings, sim, back_at=sim.now + timedelta(seconds=20), phase=0.5)

    assert delivered == oldest.id  # the oldest parked delivery is the probe: it arrives first
    probe = Delivery.get_by_id(oldest.id)
    assert probe.status == "delivered" and probe.manual_attempts >= 15  # failed probes, none exhausted it
    assert probe.attempts - probe.manual_attempts == oldest.attempts - oldest.manual_attempts  # its ladder untouched
    assert Endpoint.get_by_id(endpoint_id).health == "recovering"  # the paced release of the rest starts


def test_a_pass_probes_a_bounded_number_of_endpoints_the_most_overdue_first(
    tenant: SimpleNamespace, make_settings: Any, sim: SimClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings(probe_interval="5s,3m")
    endpoints = []
    for _ in range(3):  # one after the other (each set aside meanwhile: events go to every endpoint)
        endpoints.append(offline_endpoint(tenant, settings, sim)[0])
        Endpoint.update(deleted_at=sim.now).where(Endpoint.id == endpoints[-1]).execute()
        sim.at(sim.now + timedelta(seconds=1))
    Endpoint.update(deleted_at=None).execute()
    monkeypatch.setattr(probes, "PROBES_PER_PASS", 2)
    publisher = RecordingPublisher()
    sim.at(sim.now + timedelta(seconds=10))

    first = probes.probe_due(publisher, settings.topology, settings.probe_interval)
    second = probes.probe_due(publisher, settings.topology, settings.probe_interval)

    assert (first, second) == (2, 1)
    assert [message.endpoint_id for message in publisher.messages] == endpoints  # oldest outage first


def wait_after_return(tenant: SimpleNamespace, settings: Settings, sim: SimClock, outage: float,
                      rng: random.Random) -> float:
    """One outage of about ``outage`` seconds: the seconds from the receiver being back to its
    first parked delivery arriving.

    The receiver is down for ``outage`` give or take 10 %, the endpoint goes offline 0 to 10 s
    after it went down (its fifth failure, depending on the traffic), and the clock's probe job
    runs every second at a random phase.
    """
    went_down = sim.now
    sim.at(went_down + timedelta(seconds=rng.uniform(0, 10)))
    endpoint_id, deliveries = offline_endpoint(tenant, settings, sim)
    back_at = went_down + timedelta(seconds=outage * rng.uniform(0.9, 1.1))
    arrived_at, delivered = run_probes(endpoint_id, settings, sim, back_at, rng.uniform(0, JOB_EVERY))
    assert delivered == deliveries[0]
    sim.at(sim.now + timedelta(hours=1))  # the next trial starts later, on an endpoint of its own
    Endpoint.update(deleted_at=sim.now).where(Endpoint.id == endpoint_id).execute()
    return (arrived_at - back_at).total_seconds()


#: Outage -> (trials, bound on the median wait, bound on the longest wait), in seconds (issue 34).
OUTAGES = {"1 minute": (60.0, 30, 30.0, 120.0), "1 hour": (3600.0, 12, None, 300.0), "1 day": (86400.0, 5, None, 300.0)}


@pytest.mark.parametrize("name", list(OUTAGES))
def test_a_receiver_back_after_an_outage_gets_its_first_parked_delivery_within_the_bounds(
    name: str, tenant: SimpleNamespace, make_settings: Any, sim: SimClock
) -> None:
    outage, trials, median_bound, longest_bound = OUTAGES[name]
    settings = make_settings(probe_interval="5s,3m")  # the default
    rng = random.Random(34)

    waits = sorted(wait_after_return(tenant, settings, sim, outage, rng) for _ in range(trials))

    median, longest = statistics.median(waits), waits[-1]
    print(f"after a {name} outage: p50 {median:.1f} s, max {longest:.1f} s over {trials} returns")
    if median_bound is not None:
        assert median < median_bound
    assert longest <= longest_bound


# -- end to end: a real worker, clock and receiver -----------------------------------------------


def test_a_receiver_back_after_an_outage_is_noticed_within_the_probe_interval_not_the_ladder(
    client: Any, tenant: SimpleNamespace, auth: Any, make_settings: Any, start_worker: Any, start_clock: Any
) -> None:
    # A ladder whose second tier is an hour: the old probe, a delivery climbing it, waited that long.
    settings = make_settings(ladder="1s,1h", probe_interval="1s,2s", release_rate=40.0)
    with outage(client, auth(tenant), settings, start_worker, start_clock, 10, parked=10) as down:
        switch, receiver, endpoint, events = down.switch, down.receiver, down.endpoint, down.events
        probed = len(receiver.requests)
        receiver.wait_for(probed + 2, timeout=10)  # the clock probes it while it is down, every 1-2 s

        switch.up = True
        back = time.monotonic()
        wait_until(lambda: statuses(endpoint["id"]) == {"delivered": 10}, timeout=20)

    answered = [r for r in receiver.requests if r.received_at >= back]
    assert answered[0].received_at - back <= 2.0 + 1.0  # the longest wait, and the clock's second
    assert [r.headers["webhook-id"] for r in answered] == events  # the probe brought the oldest first
    # Nothing was used up: no delivery failed, and only the first was probed (outside its ladder).
    assert not Delivery.select().where(
        (Delivery.status == "failed") | ((Delivery.manual_attempts > 0) & (Delivery.event != events[0]))
    ).exists()


def test_try_now_is_refused_with_the_reason_unless_the_endpoint_is_offline(
    client: Any, tenant: SimpleNamespace, other_tenant: SimpleNamespace, auth: Any
) -> None:
    endpoint = create_endpoint(client, auth(tenant), "http://127.0.0.1:9/hook")
    url = f"/v1/endpoints/{endpoint['id']}/probe"

    online = client.post(url, headers=auth(tenant))
    Endpoint.update(health="offline", offline_since=Endpoint.created_at).execute()
    nothing_owed = client.post(url, headers=auth(tenant))
    client.patch(f"/v1/endpoints/{endpoint['id']}", json={"status": "disabled"}, headers=auth(tenant))
    disabled = client.post(url, headers=auth(tenant))

    assert online.status_code == 409 and "is online" in online.get_json()["message"]
    assert nothing_owed.status_code == 409 and "no delivery to probe it with" in nothing_owed.get_json()["message"]
    assert disabled.status_code == 409 and "enable it" in disabled.get_json()["message"]
    assert client.post(url, headers=auth(other_tenant)).status_code == 404
    documented = client.get("/openapi.json").json["paths"]["/v1/endpoints/{endpoint_id}/probe"]["post"]
    assert {"202", "404", "409", "503"} <= set(documented["responses"]) and "Try now" in documented["summary"]


def test_try_now_queues_a_probe_of_the_oldest_undelivered_delivery_and_records_who_asked(
    client: Any, tenant: SimpleNamespace, auth: Any, settings: Settings
) -> None:
    from tests.conftest import queue_messages
    from webhooks.storage.models import ManualAttempt

    endpoint = create_endpoint(client, auth(tenant), "http://127.0.0.1:9/hook")
    Endpoint.update(health="offline", offline_since=Endpoint.created_at).execute()
    events = [send(client, auth(tenant), payload={"n": n})["id"] for n in range(3)]

    tried = client.post(f"/v1/endpoints/{endpoint['id']}/probe", headers=auth(tenant))
    shown = client.get(f"/v1/endpoints/{endpoint['id']}", headers=auth(tenant)).get_json()

    oldest = Delivery.get(Delivery.event == events[0])
    assert tried.status_code == 202
    assert tried.get_data(as_text=True).strip() == (  # as docs/support.md shows it
        f'{{"endpoint_id":"{endpoint["id"]}","delivery_id":"{oldest.id}","attempt_no":1}}')
    queued = [DeliveryMessage.decode(body, headers) for body, headers in queue_messages(settings.topology.primary)]
    assert [(m.delivery_id, m.trigger) for m in queued] == [(oldest.id, "probe")]
    asked = ManualAttempt.get(ManualAttempt.delivery == oldest.id)
    assert (asked.trigger, asked.requested_by_kind) == ("probe", "api_key")
    assert statuses(endpoint["id"]) == {"parked": 3}  # nothing changes until the probe is made
    row = Endpoint.get_by_id(endpoint["id"])
    assert row.probe_delivery_id == oldest.id and row.next_probe_at > utcnow()  # the clock's next probe comes later
    assert shown["next_probe_at"] == isoformat(row.next_probe_at)
