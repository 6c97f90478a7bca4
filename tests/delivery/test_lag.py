"""The event loop's own delay: calls do not count it against a receiver."""

from __future__ import annotations

from webhooks.delivery.lag import PROBE_SECONDS, TURNS_PER_CALL, LoopLag


def test_a_late_probe_allows_several_turns_of_that_lateness_and_the_allowance_fades() -> None:
    lag = LoopLag()
    lag.observe(0.03, now=10.0)
    assert abs(lag.allowance(10.0) - 0.03 * TURNS_PER_CALL) < 1e-9
    for step in range(1, 100):
        lag.observe(0.0, now=10.0 + step * PROBE_SECONDS)
    assert lag.allowance(10.0 + 100 * PROBE_SECONDS) < 0.01


def test_a_stall_still_going_on_counts_in_full() -> None:
    lag = LoopLag()
    lag.observe(0.0, now=5.0)
    assert abs(lag.allowance(5.0 + PROBE_SECONDS + 0.4) - 0.4) < 1e-9, "the probe has not run for 0.4 s past its time"


def test_a_quiet_loop_allows_nothing() -> None:
    lag = LoopLag()
    assert lag.allowance(1.0) == 0.0
    lag.observe(0.0, now=1.0)
    assert lag.allowance(1.0 + PROBE_SECONDS / 2) == 0.0
