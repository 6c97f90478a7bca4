"""The backoff ladder and duration names."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhooks.durations import name_ms, parse_ms
from webhooks.messaging.ladder import DEFAULT_LADDER, Ladder
from webhooks.messaging.topology import Topology


def test_default_ladder_makes_ten_attempts_over_about_three_days():
    ladder = Ladder.parse(DEFAULT_LADDER)
    assert ladder.max_attempts == 10
    assert 2.9 < sum(ladder.delays_ms) / 86_400_000 < 3.5


def test_nth_failure_waits_nth_delay_and_the_last_attempt_is_final():
    ladder = Ladder.parse("1s,2s")
    assert ladder.next_delay_ms(1) == 1000
    assert ladder.next_delay_ms(2) == 2000
    assert ladder.next_delay_ms(3) is None


@pytest.mark.parametrize("text,ms", [("500ms", 500), ("5s", 5000), ("5m", 300_000), ("2h", 7_200_000), ("1d", 86_400_000), ("7", 7000)])
def test_durations_parse_every_unit(text, ms):
    assert parse_ms(text) == ms


@pytest.mark.parametrize("bad", ["", "5x", "-1s", "1.5s", "s", ","])
def test_a_malformed_ladder_is_rejected_with_a_message(bad):
    with pytest.raises(ValueError):
        Ladder.parse(bad)


def test_delay_names_are_canonical_so_one_delay_is_one_queue():
    assert name_ms(60_000) == "1m"
    assert name_ms(90_000) == "90s"
    assert name_ms(1500) == "1500ms"
    assert Topology("webhooks", Ladder.parse("60s,1m")).wait_queues() == {"webhooks.wait.1m": 60_000, "webhooks.wait.defer": 1000}


@given(st.integers(min_value=1, max_value=10**10))
def test_a_canonical_name_parses_back_to_the_same_delay(ms):
    assert parse_ms(name_ms(ms)) == ms


def test_waiting_again_hops_to_the_longest_tier_that_does_not_overshoot():
    ladder = Ladder.parse("5s,5m,30m")
    assert ladder.longest_tier_within(10 * 60_000) == 300_000
    assert ladder.longest_tier_within(4000) is None


def test_queue_names_carry_the_delay():
    topology = Topology("webhooks", Ladder.parse("5s,30m"))
    assert topology.all_queues() == ["webhooks.deliver", "webhooks.bulk", "webhooks.dead", "webhooks.wait.5s", "webhooks.wait.30m", "webhooks.wait.defer"]
