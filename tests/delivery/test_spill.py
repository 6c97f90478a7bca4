"""The bound on messages waiting in a worker's memory, and how lanes share it (``webhooks.delivery.spill``).

Unit tests on a stand-in for the engine's runtime: no broker, no database. The engine's
end-to-end test of a backlog beyond the prefetch is in ``test_engine``.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, Awaitable, Callable, Iterable

from tests.delivery.lane_helpers import Broker, message, slow_lane
from webhooks.delivery import backlog, spill
from webhooks.delivery.budget import Budget
from webhooks.delivery.lane import Held, Lane
from webhooks.delivery.lanes import Lanes
from webhooks.delivery.spill import MIN_KEEP, REFILL_BATCH, SPILL_BATCH, Spiller


class Runtime(SimpleNamespace):
    """What ``Spiller`` uses of ``webhooks.delivery.runtime.Runtime``; spawned work is kept, not run."""

    def __init__(self, lanes: Lanes) -> None:
        super().__init__(lanes=lanes, stopping=asyncio.Event(), spawned=[], published=[],
                         given_back=[], woken=0,
                         settings=SimpleNamespace(topology=SimpleNamespace(primary="primary")))
        self.tasks = SimpleNamespace(spawn=self.spawned.append)
        self.broker = SimpleNamespace(session=SimpleNamespace(number=1, is_open=True), publish=self.publish)
        self.db = SimpleNamespace(until_up=self.until_up, return_backlog=self.return_backlog, run=None)

    def run_spawned(self) -> None:
        spawned, self.spawned = self.spawned, []
        for coroutine in spawned:
            asyncio.run(coroutine)  # type: ignore[arg-type]

    def give_back(self, held: Iterable[Held]) -> None:
        self.given_back.extend(one.message.delivery_id for one in held)

    def return_backlog(self, messages: list[Any]) -> None:
        self.given_back.extend(message.delivery_id for message in messages)

    def wake(self) -> None:
        self.woken += 1

    async def until_up(self, batcher: Callable[[Any], Awaitable[Any]], item: Any) -> Any:
        return await batcher(item)

    async def publish(self, queue: str, body: bytes, headers: dict[str, Any]) -> bool:
        self.published.append(queue)
        return True

    @property
    def loop(self) -> Any:
        return SimpleNamespace(time=lambda: 100.0)


def backlogged_lanes(count: int, each: int, broker: Broker | None = None) -> Lanes:
    lanes = Lanes(ceiling=128)
    for n in range(count):
        slow_lane(lanes, "ten_a", f"ep_{n}", each, start_tag=10_000 * n, broker=broker)
    return lanes


def test_a_lane_alone_keeps_what_its_window_and_pace_need() -> None:
    lanes = backlogged_lanes(1, 10)
    spiller = Spiller(Runtime(lanes), hold=7_500)
    spiller.reshare()
    lane = lanes.lanes["ep_0"]

    lane.pace = 0.0  # nothing answered in its first second
    assert spiller.keep(lane) == MIN_KEEP
    lane.pace = 100.0  # answers per second
    assert spiller.keep(lane) == 100 * spill.HOLD_SECONDS


def test_a_lane_whose_pace_is_not_measured_yet_keeps_its_whole_share() -> None:
    lanes = backlogged_lanes(1, 10)
    spiller = Spiller(Runtime(lanes), hold=7_500)
    spiller.reshare()

    assert lanes.lanes["ep_0"].pace is None
    assert spiller.keep(lanes.lanes["ep_0"]) == spiller.share == 6_000, "the bound on all lanes still holds"


def test_waiting_messages_may_use_the_share_of_calls_in_flight_that_calls_leave_unused() -> None:
    lanes = backlogged_lanes(1, 20_000)
    runtime = Runtime(lanes)
    spiller = Spiller(runtime, hold=7_500, lendable=15_000)

    lanes.under_way = 128  # one fast endpoint's window
    assert spiller.high == 7_500 + 15_000 - 128
    spiller.check()
    assert runtime.spawned == [], "a burst one fast endpoint drains in seconds stays in memory"

    lanes.under_way = 15_000  # calls in flight take their whole share back
    assert spiller.high == 7_500
    spiller.check()
    assert len(runtime.spawned) == 1
    for coroutine in runtime.spawned:
        coroutine.close()  # type: ignore[attr-defined]


def test_waiting_messages_and_calls_in_flight_together_never_take_the_room_for_arrivals() -> None:
    budget = Budget.of(30_000)
    lanes = Lanes(ceiling=128)
    spiller = Spiller(Runtime(lanes), budget.hold, lendable=budget.in_flight)
    for under_way in (0, 128, 5_000, 15_000):
        lanes.under_way = under_way
        assert spiller.high + under_way <= budget.in_flight + budget.hold < budget.prefetch


def test_lanes_with_a_backlog_share_the_bound_so_that_lanes_at_their_keep_never_add_up_to_a_spill() -> None:
    lanes = backlogged_lanes(100, 1)
    runtime = Runtime(lanes)
    spiller = Spiller(runtime, hold=7_500)
    spiller.reshare()

    keeps = [spiller.keep(lane) for lane in lanes]

    assert keeps == [60] * 100  # 80 % of 7,500, shared by 100
    for lane in lanes:
        for n in range(spiller.keep(lane) - len(lane.queue)):
            lanes.add(message("ten_a", lane.endpoint_id, 1000 + n), receipt=None, now=0.0)
    spiller.check()
    spiller.spill_long_lanes()
    assert lanes.held == 6_000 and runtime.spawned == []


def test_to_meet_the_bound_lanes_give_up_what_they_hold_beyond_their_keep_first_then_half_of_the_rest() -> None:
    lanes = backlogged_lanes(2, 100)
    spiller = Spiller(Runtime(lanes), hold=500)  # down to 400: each of the two keeps 200
    spiller.reshare()

    assert spiller.plan(lanes.held - 400) == {}
    assert spiller.plan(lanes.held - 100) == {lanes.lanes["ep_0"]: 50, lanes.lanes["ep_1"]: 50}
    assert spiller.plan(lanes.held) == {lanes.lanes["ep_0"]: 50, lanes.lanes["ep_1"]: 50}, "each keeps half"


def test_a_tenant_with_a_few_messages_behind_a_flood_never_has_them_spilled() -> None:
    lanes = Lanes(ceiling=128)
    slow_lane(lanes, "ten_a", "ep_flood", 100)
    slow_lane(lanes, "ten_b", "ep_b", 1, start_tag=1_000)
    spiller = Spiller(Runtime(lanes), hold=10)  # each lane keeps 8
    spiller.reshare()

    plan = spiller.plan(lanes.held - spiller.low)

    assert plan == {lanes.lanes["ep_flood"]: 92}, "B's message stays in its lane, next to go"


def test_calls_in_flight_do_not_count_against_the_bound_on_waiting_messages() -> None:
    lanes = backlogged_lanes(100, 75)
    runtime = Runtime(lanes)
    lanes.under_way = 10_000  # as many deliveries under way
    spiller = Spiller(runtime, hold=7_500)

    spiller.check()
    assert runtime.spawned == []

    lanes.add(message("ten_a", "ep_0", 999), receipt=None, now=0.0)
    spiller.check()
    assert len(runtime.spawned) == 1
    for coroutine in runtime.spawned:
        coroutine.close()  # type: ignore[attr-defined]


def test_a_spill_beyond_one_statement_goes_in_batches_and_every_message_moved_is_acked(monkeypatch: Any) -> None:
    broker = Broker()
    lanes = backlogged_lanes(1, 2 * SPILL_BATCH + 10, broker)
    runtime = Runtime(lanes)
    statements: list[int] = []

    async def marked(messages: list[Any]) -> list[bool]:
        statements.append(len(messages))
        return [True] * len(messages)

    spiller = Spiller(runtime, hold=100)
    monkeypatch.setattr(spiller, "_run_spill", marked)
    spiller.check()
    runtime.run_spawned()

    moved = 2 * SPILL_BATCH + 10 - 80  # down to 80 % of the bound
    assert statements == [SPILL_BATCH, moved - SPILL_BATCH]
    assert lanes.held == 80 and len(broker.acked) == moved
    assert lanes.lanes["ep_0"].spilled


def spilled_lane(spiller: Spiller, waiting: int) -> Lane:
    lanes: Lanes = spiller.rt.lanes
    slow_lane(lanes, "ten_a", "ep_a", waiting)
    lane = lanes.lanes["ep_a"]
    lane.spilled = True
    spiller.reshare()
    return lane


def test_a_lane_fetches_its_backlog_back_only_once_it_runs_below_half_its_keep_and_only_what_it_keeps() -> None:
    spiller = Spiller(Runtime(Lanes(ceiling=128)), hold=7_500)
    lane = spilled_lane(spiller, waiting=MIN_KEEP // 2)
    assert spiller.short(lane) == 0

    lanes: Lanes = spiller.rt.lanes
    lanes.take_newest(lane, 1)
    assert spiller.short(lane) == min(MIN_KEEP - (MIN_KEEP // 2 - 1), REFILL_BATCH)


def fetching(spiller: Spiller, fetched: list[Any]) -> list[tuple[str, int]]:
    """The database hands out ``fetched`` (as many as asked); the fetches made, as (endpoint, count)."""
    asked: list[tuple[str, int]] = []

    async def in_db(fn: Any, endpoint_id: str, count: int) -> Any:
        assert fn is backlog.take_spilled
        asked.append((endpoint_id, count))
        return fetched[:count]

    spiller.rt.db.run = in_db
    return asked


def test_a_backlog_taken_back_goes_straight_into_its_lane_without_a_trip_through_the_broker() -> None:
    spiller = Spiller(Runtime(Lanes(ceiling=128)), hold=7_500)
    lane = spilled_lane(spiller, waiting=0)
    fetching(spiller, [message("ten_a", "ep_a", n) for n in range(150)])

    spiller.refill("ep_a", lane)
    spiller.rt.run_spawned()

    assert [held.message.delivery_id for held in lane.queue] == [f"dlv_ep_a_{n}" for n in range(150)]
    assert all(held.receipt is None for held in lane.queue), "no broker message to ack"
    assert spiller.rt.published == [] and spiller.rt.woken == 1
    assert not lane.spilled  # it asked for 200 and got 150: nothing more waits in the database


def test_a_lane_does_not_take_its_backlog_back_twice_at_once() -> None:
    spiller = Spiller(Runtime(Lanes(ceiling=128)), hold=7_500)
    lane = spilled_lane(spiller, waiting=0)
    asked = fetching(spiller, [message("ten_a", "ep_a", n) for n in range(REFILL_BATCH)])

    spiller.refill("ep_a", lane)
    spiller.refill("ep_a", lane)
    assert len(spiller.rt.spawned) == 1
    spiller.rt.run_spawned()

    assert asked == [("ep_a", REFILL_BATCH)] and lane.spilled, "a full batch: more may wait"
    spiller.refill("ep_a", lane)
    assert spiller.rt.spawned == [], "the lane is full again"


def test_a_backlog_taken_back_while_the_worker_stops_goes_back_to_the_database() -> None:
    spiller = Spiller(Runtime(Lanes(ceiling=128)), hold=7_500)
    lane = spilled_lane(spiller, waiting=0)
    fetching(spiller, [message("ten_a", "ep_a", n) for n in range(3)])

    spiller.refill("ep_a", lane)
    spiller.rt.stopping.set()  # while the fetch was under way
    spiller.rt.run_spawned()

    assert len(lane.queue) == 0 and spiller.rt.given_back == [f"dlv_ep_a_{n}" for n in range(3)]


def test_an_orphaned_backlog_found_by_the_scan_gets_a_lane_here() -> None:
    spiller = Spiller(Runtime(Lanes(ceiling=128)), hold=7_500)
    fetching(spiller, [message("ten_b", "ep_b", n) for n in range(REFILL_BATCH)])

    spiller.refill("ep_b", None)
    spiller.rt.run_spawned()

    lane = spiller.rt.lanes.lanes["ep_b"]
    assert len(lane.queue) == REFILL_BATCH and lane.spilled and lane.tenant_id == "ten_b"


def test_a_spilled_lane_with_nothing_under_way_fetches_its_backlog_back_in_housekeeping() -> None:
    spiller = Spiller(Runtime(Lanes(ceiling=128)), hold=7_500)
    lane = spilled_lane(spiller, waiting=0)
    fetching(spiller, [message("ten_a", "ep_a", n) for n in range(3)])

    spiller.refill_short_lanes()
    spiller.rt.run_spawned()

    assert len(lane.queue) == 3 and spiller.rt.published == []
