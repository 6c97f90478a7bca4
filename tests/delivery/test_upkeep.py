"""A lane's pace, measured by the worker's housekeeping (``webhooks.delivery.upkeep.measure_pace``)."""

from __future__ import annotations

import pytest

from webhooks.delivery.lanes import Lane
from webhooks.delivery.upkeep import PACE_WEIGHT, measure_pace


def test_a_new_lane_is_measured_from_its_first_round_and_its_first_whole_second_counts_as_it_is() -> None:
    lane = Lane("ep_a", "ten_a", ceiling=128)
    lane.finished = 40  # settled before the first round: part of a second, not counted
    measure_pace(lane, now=10.3)
    assert lane.pace is None and lane.finished == 0

    lane.finished = 1_000
    measure_pace(lane, now=11.3)
    assert lane.pace == pytest.approx(1_000.0), "not 300: smoothing from nothing would under-count it"


def test_after_the_first_second_the_pace_is_smoothed() -> None:
    lane = Lane("ep_a", "ten_a", ceiling=128)
    measure_pace(lane, now=0.0)
    lane.finished = 1_000
    measure_pace(lane, now=1.0)

    lane.finished = 0
    measure_pace(lane, now=2.0)

    assert lane.pace == pytest.approx((1 - PACE_WEIGHT) * 1_000.0)
