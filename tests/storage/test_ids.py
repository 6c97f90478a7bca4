"""Ids: prefixed, time-ordered, and strictly increasing within a process."""

from __future__ import annotations

import os
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


def test_a_forked_child_draws_random_parts_of_its_own() -> None:
    new_id("evt")  # the parent holds random bytes not used yet
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its ids, then gone
        os.write(write, " ".join(new_ids("evt", 3, now_ms=1_700_000_000_000)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        child = pipe.read().split()

    parent = new_ids("evt", 3, now_ms=1_700_000_000_000)

    assert len(child) == 3 and not set(child) & set(parent)


def test_ids_draw_the_os_s_random_bytes_a_pool_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # os.urandom lets go of the GIL for its system call: an event loop making an id waited to get it back
    # behind every busy thread (0.28 ms an id beside one thread running Python, for 0.02 ms of work).
    draws: list[int] = []
    urandom = os.urandom
    monkeypatch.setattr(os, "urandom", lambda size: draws.append(size) or urandom(size))

    made = {new_id("att") for _ in range(1000)} | set(new_ids("evt", 100, now_ms=1_700_000_000_000))

    assert len(made) == 1100 and len(draws) <= 4
