"""How a worker process shares out WORKER_PREFETCH: calls in flight, messages waiting in memory, room for arrivals."""

from __future__ import annotations

import pytest

from webhooks.config import Settings
from webhooks.delivery.budget import RESERVED_FILES, Budget


def test_half_the_prefetch_may_be_calls_in_flight_and_a_quarter_may_wait_in_memory() -> None:
    budget = Budget.of(30_000)

    assert (budget.in_flight, budget.hold) == (15_000, 7_500)


def test_calls_in_flight_and_waiting_messages_together_leave_the_broker_room_to_hand_out_more() -> None:
    for prefetch in (40, 1_000, 30_000, 65_535):
        budget = Budget.of(prefetch)
        assert budget.in_flight + budget.hold < prefetch


def test_with_the_default_settings_one_process_may_hold_10000_calls_in_flight() -> None:
    budget = Budget.of(Settings.from_env(env={}).worker_prefetch, open_files=20_000)

    assert budget.in_flight >= 10_000
    # 100 endpoints at the default ceiling fit, too.
    assert budget.in_flight >= 100 * Settings.from_env(env={}).endpoint_max_in_flight


def test_calls_in_flight_never_need_more_sockets_than_the_process_may_open() -> None:
    budget = Budget.of(30_000, open_files=1_024)

    assert budget.in_flight == 1_024 - RESERVED_FILES
    assert budget.hold == 7_500


def test_even_the_smallest_prefetch_allows_one_call_and_one_waiting_message() -> None:
    assert Budget.of(1, open_files=10) == Budget(prefetch=1, in_flight=1, hold=1)


def test_the_prefetch_defaults_to_30000_and_must_fit_amqps_16_bit_prefetch_count() -> None:
    assert Settings.from_env(env={}).worker_prefetch == 30_000
    assert Settings.from_env(env={"WORKER_PREFETCH": "65535"}).worker_prefetch == 65_535
    for bad in ("0", "65536", "ten"):
        with pytest.raises(ValueError, match="WORKER_PREFETCH must be a whole number of messages from 1 to 65,535"):
            Settings.from_env(env={"WORKER_PREFETCH": bad})
