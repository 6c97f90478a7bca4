"""Ids: prefixed, time-ordered, and strictly increasing within a process."""

from __future__ import annotations

import threading

import pytest

from webhooks.storage import ids
from webhooks.storage.ids import has_prefix, new_id, new_ids


def test_an_id_has_its_prefix_and_26_characters_of_the_alphabet() -> None:
    value = new_id("evt")

    assert has_prefix(value, "evt") and not has_prefix(value, "dlv")
    assert len(value) == len("evt_") + 26


def test_ids_made_in_one_millisecond_still_sort_in_the_order_they_were_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ids.time, "time", lambda: 1_800_000_000.0)  # the clock does not move

    made = [new_id("evt") for _ in range(2000)] + new_ids("evt", 500) + [new_id("evt")]

    assert made == sorted(made) and len(set(made)) == len(made)


def test_ids_keep_increasing_when_the_clock_steps_back(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1_800_000_000.5]
    monkeypatch.setattr(ids.time, "time", lambda: now[0])
    before = new_id("dlv")
    now[0] -= 2.0  # an NTP step backwards

    after = new_ids("dlv", 3)

    assert [before, *after] == sorted([before, *after])


def test_ids_from_many_threads_are_unique_and_each_threads_are_increasing() -> None:
    made: dict[int, list[str]] = {}

    def make(n: int) -> None:
        made[n] = [new_id("att") for _ in range(1000)]

    threads = [threading.Thread(target=make, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert all(batch == sorted(batch) for batch in made.values())
    assert len({value for batch in made.values() for value in batch}) == 8000


def test_an_id_of_a_given_time_keeps_that_time() -> None:
    assert new_id("evt", now_ms=0).startswith("evt_0000000000")
