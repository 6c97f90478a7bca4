"""Group commit: callers on many threads share one batch call, each gets its own result."""

from __future__ import annotations

import threading
import time
from typing import Sequence

import pytest

from tests.concurrency import in_threads
from webhooks.group_commit import GroupCommit


def test_a_lone_caller_runs_its_own_batch_at_once() -> None:
    batches: list[list[int]] = []
    double = GroupCommit(lambda items: batches.append(list(items)) or [item * 2 for item in items])

    assert double(21) == 42
    assert batches == [[21]]


def test_callers_arriving_during_a_batch_share_the_next_one_and_each_get_their_own_result() -> None:
    batches: list[list[int]] = []
    first_running = threading.Event()
    release_first = threading.Event()

    def run(items: Sequence[int]) -> list[int]:
        batches.append(list(items))
        if len(batches) == 1:
            first_running.set()
            release_first.wait(5)
        return [item * 10 for item in items]

    commit = GroupCommit(run)
    results: dict[int, int] = {}

    def call(item: int) -> None:
        results[item] = commit(item)

    leader = threading.Thread(target=call, args=(0,))
    leader.start()
    assert first_running.wait(5)
    others = [threading.Thread(target=call, args=(item,)) for item in range(1, 9)]
    for thread in others:
        thread.start()
    time.sleep(0.2)  # all eight are queued behind the running batch
    release_first.set()
    for thread in [leader, *others]:
        thread.join(5)

    assert results == {item: item * 10 for item in range(9)}
    assert batches[0] == [0]
    assert sorted(batches[1]) == list(range(1, 9)), "the eight waiting callers went in one batch"
    assert len(batches) == 2


def test_batches_never_exceed_max_batch_and_nobody_is_left_waiting() -> None:
    sizes: list[int] = []

    def run(items: Sequence[int]) -> list[int]:
        sizes.append(len(items))
        time.sleep(0.01)
        return list(items)

    commit = GroupCommit(run, max_batch=4)

    results = in_threads(40, commit, timeout=10)

    assert results == list(range(40))
    assert max(sizes) <= 4
    assert sum(sizes) == 40


def test_a_failing_batch_raises_in_each_of_its_callers_and_the_next_call_works() -> None:
    failing = {"on": True}

    def run(items: Sequence[str]) -> list[str]:
        if failing["on"]:
            raise ConnectionError("database down")
        return [item.upper() for item in items]

    commit = GroupCommit(run)
    with pytest.raises(ConnectionError, match="database down"):
        commit("a")
    failing["on"] = False
    assert commit("b") == "B"


def test_a_batch_returning_the_wrong_number_of_results_is_an_error_not_a_mixup() -> None:
    commit = GroupCommit(lambda items: [])
    with pytest.raises(RuntimeError, match="0 results for 1 items"):
        commit("x")
