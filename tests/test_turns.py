"""Taking turns: one tenant's item does not wait behind everything another tenant queued first.

``Rotation`` is the one round-robin (lanes, batches, the web's publisher and its server's
requests); ``in_turns`` orders one batch; ``TurnQueue`` is the queue threads share (the web's
background publisher), and takes turns over everything waiting in it, not only over the
first batch's worth.
"""

from __future__ import annotations

import threading
import time

from webhooks.turns import Rotation, TurnQueue, in_turns


def tenant(item: str) -> str:
    return item.split("-")[0]


def test_a_rotation_serves_keys_in_turn_and_a_key_held_out_of_turn_keeps_its_items_and_returns_at_the_end() -> None:
    rotation: Rotation[str, str] = Rotation()
    for item in ["a-1", "a-2", "b-1", "c-1", "c-2"]:
        rotation.put(tenant(item), item)

    assert rotation.take() == ("a", "a-1")
    rotation.hold("b")
    assert list(rotation.in_turn()) == ["c", "a"] and rotation.waiting("b") == 1
    assert rotation.take("a") == ("a", "a-2")
    rotation.resume("b")

    assert rotation.take_many(10) == ["c-1", "b-1", "c-2"]
    assert len(rotation) == 0 and not rotation and rotation.take() is None


def test_in_turns_takes_one_item_of_each_tenant_then_a_second_of_each() -> None:
    batch, rest = in_turns(["a-1", "a-2", "a-3", "b-1", "c-1", "b-2"], tenant, 4)

    assert batch == ["a-1", "b-1", "c-1", "a-2"]
    assert rest == ["a-3", "b-2"]


def test_a_turn_queue_gives_a_tenant_queued_behind_a_flood_a_place_in_the_next_batch() -> None:
    queue: TurnQueue[str] = TurnQueue(tenant)
    queue.put(f"a-{n}" for n in range(1000))
    queue.put(["b-1", "b-2"])

    assert queue.take(4) == ["a-0", "b-1", "a-1", "b-2"]
    assert queue.take(3) == ["a-2", "a-3", "a-4"]
    assert len(queue) == 995


def test_each_tenant_s_items_keep_their_order_and_a_tenant_that_ran_out_queues_afresh_at_the_end() -> None:
    queue: TurnQueue[str] = TurnQueue(tenant)
    queue.put(["a-1", "b-1", "a-2"])
    assert queue.take(2) == ["a-1", "b-1"]

    queue.put(["c-1", "b-2"])

    assert queue.take(10) == ["a-2", "c-1", "b-2"]
    assert len(queue) == 0 and queue.take(5) == []


def test_wait_returns_once_enough_items_are_queued_or_when_its_time_is_up() -> None:
    queue: TurnQueue[str] = TurnQueue(tenant)
    assert queue.wait(0.01) is False

    putter = threading.Timer(0.05, lambda: queue.put(["a-1", "a-2"]))
    putter.start()
    assert queue.wait(10, at_least=2) is True
    putter.join()

    started = time.monotonic()
    assert queue.wait(0.05, at_least=3) is False
    assert time.monotonic() - started >= 0.05
