"""A tenant far over its share of new deliveries goes to the bulk queue (``webhooks.messaging.shares``)."""

from __future__ import annotations

from webhooks.messaging.shares import RecentShares


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_tenant_over_its_share_is_bulk_and_one_under_it_is_not() -> None:
    shares = RecentShares(bulk_after=500, window=1.0, clock=Clock())
    shares.add({"ten_a": 2_000, "ten_b": 1})

    assert shares.over(["ten_a", "ten_b", "ten_c"]) == frozenset({"ten_a"})


def test_a_tenant_that_stops_flooding_comes_back_under_its_share_within_seconds() -> None:
    clock = Clock()
    shares = RecentShares(bulk_after=500, window=1.0, clock=clock)
    shares.add({"ten_a": 2_000})
    clock.now = 1.0
    assert shares.over(["ten_a"]) == frozenset({"ten_a"})  # 2,000 / e: still flooding

    clock.now = 3.0
    assert shares.over(["ten_a"]) == frozenset()


def test_a_steady_rate_above_the_share_stays_bulk_and_one_below_it_does_not() -> None:
    clock = Clock()
    shares = RecentShares(bulk_after=500, window=1.0, clock=clock)
    for _ in range(100):  # 10 s: 1,000 a second for ten_a, 10 a second for ten_b
        clock.now += 0.1
        shares.add({"ten_a": 100, "ten_b": 1})

    assert shares.over(["ten_a", "ten_b"]) == frozenset({"ten_a"})


def test_anyone_over_holds_while_the_highest_count_decays_above_the_share() -> None:
    clock = Clock()
    shares = RecentShares(bulk_after=500, window=1.0, clock=clock)
    shares.add({"ten_b": 10})
    assert not shares.anyone_over()
    shares.add({"ten_a": 2_000})  # above 500 for ln(4) = 1.39 s
    clock.now = 1.3
    assert shares.anyone_over() and shares.over(["ten_a"]) == frozenset({"ten_a"})
    clock.now = 1.5
    assert not shares.anyone_over() and shares.over(["ten_a"]) == frozenset()
