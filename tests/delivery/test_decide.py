"""What follows an attempt: the ladder for automatic attempts, the delivery's place kept for resends."""

from __future__ import annotations

from datetime import datetime, timedelta

from webhooks.delivery.classify import Verdict, classify
from webhooks.delivery.decide import after_attempt, wait_queue_for
from webhooks.messaging.ladder import Ladder
from webhooks.messaging.messages import DeliveryMessage
from webhooks.messaging.topology import Topology

LADDER = Ladder.parse("5s,5m,30m,2h")
TOPOLOGY = Topology("t", LADDER)
NOW = datetime(2026, 11, 23, 12, 0, 0)
FAILED = classify(500, {})
DELIVERED = classify(200, {})


def attempt(n: int, trigger: str = "ladder") -> DeliveryMessage:
    return DeliveryMessage("dlv_1", "evt_1", "ep_1", "ten_1", "order.created", "2026-11-23T12:00:00.000Z", {},
                           attempt=n, trigger=trigger)


def test_the_nth_failed_ladder_attempt_waits_the_nth_tier() -> None:
    step = after_attempt(attempt(2), FAILED, "retrying", 0, NOW, LADDER, TOPOLOGY, NOW)
    assert step.status == "retrying"
    assert step.queue == "t.wait.5m" and step.next_attempt_at == NOW + timedelta(minutes=5)
    assert step.next_message is not None and step.next_message.attempt == 3 and step.next_message.trigger == "ladder"


def test_the_attempt_after_the_last_tier_is_final_and_exhausts_the_ladder() -> None:
    step = after_attempt(attempt(5), FAILED, "retrying", 0, NOW, LADDER, TOPOLOGY, NOW)
    assert step.status == "failed" and step.exhausted and step.next_message is None


def test_retry_after_longer_than_the_tier_lengthens_the_wait_and_never_shortens_it() -> None:
    slow_down = Verdict(False, retry_after=120.0, error_class="http_status", summary="HTTP 429")
    longer = after_attempt(attempt(1), slow_down, "pending", 0, NOW, LADDER, TOPOLOGY, NOW)
    assert longer.next_attempt_at == NOW + timedelta(seconds=120) and longer.queue == "t.wait.5s"
    assert longer.next_message is not None and longer.next_message.not_before is not None
    hurry = Verdict(False, retry_after=1.0, error_class="http_status", summary="HTTP 503")
    shorter = after_attempt(attempt(2), hurry, "retrying", 0, NOW, LADDER, TOPOLOGY, NOW)
    assert shorter.next_attempt_at == NOW + timedelta(minutes=5)


def test_a_failed_resend_of_a_retrying_delivery_keeps_its_place_on_the_ladder() -> None:
    # Two ladder attempts failed; the third was due in 4 minutes (in the 5m tier) when support resent it.
    due = NOW + timedelta(minutes=4)
    resend = after_attempt(attempt(3, "resend"), FAILED, "retrying", 0, due, LADDER, TOPOLOGY, NOW)
    assert resend.status == "retrying" and resend.manual_attempts == 1
    assert resend.next_attempt_at == due, "the pending attempt stays when it was due"
    assert resend.queue == "t.wait.5s" and resend.next_message is not None
    assert resend.next_message.trigger == "ladder" and resend.next_message.not_before is not None
    # When that attempt fails too, the ladder goes on as if the resend had never happened: 30 minutes.
    following = after_attempt(attempt(4), FAILED, "retrying", resend.manual_attempts, due, LADDER, TOPOLOGY, due)
    assert following.queue == "t.wait.30m" and following.next_attempt_at == due + timedelta(minutes=30)


def test_a_failed_resend_of_an_overdue_delivery_lets_its_ladder_attempt_go_at_once() -> None:
    step = after_attempt(attempt(2, "resend"), FAILED, "retrying", 0, NOW - timedelta(minutes=1), LADDER, TOPOLOGY, NOW)
    assert step.next_attempt_at == NOW and step.queue == TOPOLOGY.primary


def test_a_resend_of_a_finished_delivery_is_one_attempt_outside_the_ladder() -> None:
    failed_again = after_attempt(attempt(6, "resend"), FAILED, "failed", 0, None, LADDER, TOPOLOGY, NOW)
    assert failed_again.status == "failed" and not failed_again.exhausted and failed_again.next_message is None
    delivered_again = after_attempt(attempt(2, "resend"), FAILED, "delivered", 0, None, LADDER, TOPOLOGY, NOW)
    assert delivered_again.status == "delivered"
    ok = after_attempt(attempt(6, "recover"), DELIVERED, "failed", 1, None, LADDER, TOPOLOGY, NOW)
    assert ok.status == "delivered" and ok.manual_attempts == 2


def test_a_failed_resend_of_a_parked_delivery_leaves_it_parked_with_its_ladder_attempts() -> None:
    step = after_attempt(attempt(3, "resend"), FAILED, "parked", 0, None, LADDER, TOPOLOGY, NOW)
    assert step.status == "parked" and step.manual_attempts == 1
    assert step.next_message is None and not step.exhausted
    # Released later, its next ladder attempt is judged by the ladder attempts made (2), not by 3.
    released = after_attempt(attempt(4), FAILED, "pending", step.manual_attempts, None, LADDER, TOPOLOGY, NOW)
    assert released.queue == "t.wait.30m"


def test_gone_parks_the_delivery_for_when_the_endpoint_is_enabled_again() -> None:
    step = after_attempt(attempt(1), classify(410, {}), "pending", 0, NOW, LADDER, TOPOLOGY, NOW)
    assert step.status == "parked" and step.next_message is None


def test_a_wait_goes_to_the_longest_tier_that_does_not_overshoot() -> None:
    assert wait_queue_for(400, LADDER, TOPOLOGY) == TOPOLOGY.primary  # held in the worker's memory
    assert wait_queue_for(3_000, LADDER, TOPOLOGY) == TOPOLOGY.defer
    assert wait_queue_for(60_000, LADDER, TOPOLOGY) == "t.wait.5s"
    assert wait_queue_for(7_200_000, LADDER, TOPOLOGY) == "t.wait.2h"


def test_a_failed_probe_parks_its_delivery_and_uses_up_no_ladder_attempt() -> None:
    # Two ladder attempts and 40 probes failed: the next ladder attempt is still the third, 5 minutes after.
    for prior in ("parked", "retrying", "pending"):
        probe = after_attempt(attempt(43, "probe"), FAILED, prior, 40, None, LADDER, TOPOLOGY, NOW)
        assert (probe.status, probe.manual_attempts, probe.next_message, probe.exhausted) == ("parked", 41, None, False)
    released = after_attempt(attempt(44), FAILED, "pending", 41, None, LADDER, TOPOLOGY, NOW)
    assert released.queue == "t.wait.30m" and not released.exhausted
    assert after_attempt(attempt(43, "probe"), DELIVERED, "parked", 40, None, LADDER, TOPOLOGY, NOW).status == "delivered"
