"""A lane's pace, measured each round of the worker's housekeeping (``Lane.measure_pace``)."""

from __future__ import annotations

import pytest

from webhooks.delivery.lane import PACE_WEIGHT, Lane
from webhooks.delivery.upkeep import TICK_SECONDS


def test_a_new_lane_is_measured_from_its_first_round_and_its_first_whole_second_counts_as_it_is() -> None:
    lane = Lane("ep_a", "ten_a", ceiling=128)
    lane.finished = 40  # settled before the first round: part of a second, not counted
    lane.measure_pace(10.3, TICK_SECONDS)
    assert lane.pace is None and lane.finished == 0

    lane.finished = 1_000
    lane.measure_pace(11.3, TICK_SECONDS)
    assert lane.pace == pytest.approx(1_000.0), "not 300: smoothing from nothing would under-count it"


def test_after_the_first_second_the_pace_is_smoothed() -> None:
    lane = Lane("ep_a", "ten_a", ceiling=128)
    lane.measure_pace(0.0, TICK_SECONDS)
    lane.finished = 1_000
    lane.measure_pace(1.0, TICK_SECONDS)

    lane.finished = 0
    lane.measure_pace(2.0, TICK_SECONDS)

    assert lane.pace == pytest.approx((1 - PACE_WEIGHT) * 1_000.0)
