"""Whole requests wait for a thread in turns by client; a client runs its share at once; 429 only past a bound."""

from __future__ import annotations

import pytest

from webhooks.config import Settings
from webhooks.server.turns import ClientTurns


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def drain(turns: ClientTurns[str]) -> list[str]:
    taken = []
    while (turn := turns.take()) is not None:
        taken.append(turn[1])
    return taken


def test_clients_take_turns_one_request_each_in_the_order_they_came() -> None:
    turns: ClientTurns[str] = ClientTurns(threads=100, share_alone=0, max_waiting=0)
    for n in range(4):
        turns.put("a", f"a{n}")
    turns.put("b", "b0")
    turns.put("c", "c0")
    turns.put("b", "b1")

    assert drain(turns) == ["a0", "b0", "c0", "a1", "b1", "a2", "a3"]


def test_no_more_run_than_there_are_threads_and_a_freed_thread_goes_to_the_client_with_fewest_running() -> None:
    turns: ClientTurns[str] = ClientTurns(threads=2, share_alone=0, max_waiting=0)
    for n in range(5):
        turns.put("flood", f"f{n}")

    assert drain(turns) == ["f0", "f1"]
    turns.put("quiet", "q0")  # arrives behind three of the flood's
    turns.done("flood")
    assert drain(turns) == ["q0"]  # it has none running: its turn comes first


def test_a_client_alone_runs_its_share_and_one_at_a_time_while_another_is_active() -> None:
    clock = Clock()
    turns: ClientTurns[str] = ClientTurns(threads=8, share_alone=3, max_waiting=0, clock=clock)
    for n in range(6):
        turns.put("a", f"a{n}")
    assert drain(turns) == ["a0", "a1", "a2"]  # its share alone; the others wait, without a thread

    turns.put("b", "b0")
    assert drain(turns) == ["b0"]
    for _ in range(3):
        turns.done("a")
    assert drain(turns) == ["a3"]  # one at a time while b was active within the last second

    clock.now += 1.5
    turns.done("a")
    assert drain(turns) == ["a4", "a5"]  # alone again


def test_a_client_is_refused_only_past_its_waiting_bound_and_others_are_not() -> None:
    turns: ClientTurns[str] = ClientTurns(threads=1, share_alone=1, max_waiting=3)
    assert [turns.put("a", f"a{n}") for n in range(5)] == [True, True, True, False, False]
    assert drain(turns) == ["a0"]
    assert turns.put("a", "a3") is True  # one left the waiting line to run
    assert turns.put("b", "b0") is True
    assert turns.waiting("a") == 3 and turns.waiting("b") == 1


def test_counts_come_back_to_zero_and_nothing_is_kept_of_a_client_with_nothing_left() -> None:
    turns: ClientTurns[str] = ClientTurns(threads=4, share_alone=2, max_waiting=0)
    for client in ("a", "b", "a", "c"):
        turns.put(client, client)
    taken: list[str] = []
    while batch := drain(turns):
        taken += batch
        for client in batch:
            turns.done(client)

    assert taken == ["a", "b", "c", "a"]  # a ran one at a time while the others were active
    assert turns.running == 0 and turns.take() is None
    assert len(turns._waiting) == 0 and not turns._waiting and turns._running == {}


def test_a_request_naming_no_one_does_not_shrink_a_client_s_share() -> None:
    """A health check or a scrape (no credential) runs in turn, but is not another tenant to share with."""
    turns: ClientTurns[str] = ClientTurns(threads=8, share_alone=3, max_waiting=0)
    turns.put("127.0.0.1", "healthz", active=False)
    for n in range(3):
        turns.put("a", f"a{n}")

    assert drain(turns) == ["healthz", "a0", "a1", "a2"]


def flood_beside_quiet() -> tuple[Clock, ClientTurns[str]]:
    """A paced flood (100 deliveries a second while others are active) of three requests and a quiet
    client's one, its first request and the quiet one's running."""
    clock = Clock()
    turns: ClientTurns[str] = ClientTurns(threads=8, share_alone=1, max_waiting=0, shared_rate=100.0, clock=clock)
    for n in range(3):
        turns.put("flood", f"f{n}")
    turns.put("quiet", "q0")
    assert drain(turns) == ["f0", "q0"]
    return clock, turns


def test_while_others_are_active_a_client_is_paced_by_the_work_its_requests_made() -> None:
    clock, turns = flood_beside_quiet()

    turns.done("flood", cost=50)  # 50 deliveries at 100 a second: its next waits half a second
    turns.done("quiet", cost=0)
    assert drain(turns) == [] and turns.next_due() == clock.now + 0.5
    turns.put("quiet", "q1")
    assert drain(turns) == ["q1"]  # the other client is not held up by the flood's pace
    turns.done("quiet", cost=1)
    clock.now += 0.25
    assert drain(turns) == []
    clock.now += 0.25
    assert drain(turns) == ["f1"]


def test_the_time_a_request_ran_counts_towards_its_pace() -> None:
    clock, turns = flood_beside_quiet()
    started = clock.now
    clock.now += 0.3

    turns.done("flood", cost=50, started=started)  # ran 0.3 s of its 0.5 s

    assert turns.next_due() == pytest.approx(clock.now + 0.2)
    clock.now += 0.2
    assert drain(turns) == ["f1"]


def test_a_client_whose_pace_is_paid_for_but_at_its_share_is_not_due_again_and_again() -> None:
    """The server's loop waits until ``next_due``: a time already passed would wake it at once, for ever."""
    clock, turns = flood_beside_quiet()
    turns.done("flood", cost=10, started=clock.now)
    clock.now += 0.1
    assert drain(turns) == ["f1"]  # paid for, and running again: at its share, with f2 waiting

    assert turns.next_due() is None  # f2 goes when f1 ends, not at a time to wake for


def test_a_client_alone_is_not_paced() -> None:
    clock = Clock()
    turns: ClientTurns[str] = ClientTurns(threads=8, share_alone=1, max_waiting=0, shared_rate=100.0, clock=clock)
    turns.put("flood", "f0")
    turns.put("flood", "f1")
    assert drain(turns) == ["f0"]

    turns.done("flood", cost=10_000)

    assert drain(turns) == ["f1"] and turns.next_due() is None


def test_the_server_s_settings_have_their_defaults_and_refuse_what_makes_no_sense() -> None:
    defaults = Settings.from_env(env={})
    assert (defaults.tenant_max_concurrent_requests, defaults.tenant_max_waiting_requests,
            defaults.tenant_shared_delivery_rate, defaults.request_read_timeout) == (4, 128, 500.0, 30.0)
    assert Settings.from_env(env={"REQUEST_READ_TIMEOUT": "2m", "TENANT_MAX_WAITING_REQUESTS": "0"}).request_read_timeout == 120
    for name, bad, rule in (("TENANT_MAX_WAITING_REQUESTS", "-1", "a whole number of requests"),
                            ("TENANT_MAX_CONCURRENT_REQUESTS", "x", "a whole number of requests"),
                            ("TENANT_SHARED_DELIVERY_RATE", "-5", "deliveries per second"),
                            ("REQUEST_READ_TIMEOUT", "0s", "a duration above zero")):
        with pytest.raises(ValueError, match=f"{name} must be {rule}"):
            Settings.from_env(env={name: bad})
