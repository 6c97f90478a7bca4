"""Fair share inside a worker: each endpoint's messages wait in its lane, lanes take turns by tenant."""

from __future__ import annotations

from tests.delivery.lane_helpers import message, open_windows, queue, quick_lane, slow_lane
from webhooks.delivery.lanes import SHARE_WINDOW_SECONDS, Lanes
from webhooks.delivery.window import Signal


def hand_out(lanes: Lanes, count: int) -> list[str]:
    """Delivery ids of the next ``count`` messages handed out (each takes a window slot)."""
    taken = []
    for _ in range(count):
        held = lanes.next_ready(now=0.0)
        if held is None:
            break
        taken.append(held.message.delivery_id)
    return taken


def test_a_tenant_with_a_flood_gets_one_turn_like_a_tenant_with_one_message() -> None:
    lanes = Lanes(ceiling=128)
    queue(lanes, "ten_a", "ep_a", 1000)
    queue(lanes, "ten_b", "ep_b")

    first_two = hand_out(lanes, 2)

    assert first_two == ["dlv_ep_a_0", "dlv_ep_b_0"]


def test_within_a_tenant_endpoints_take_turns_and_each_keeps_its_own_order() -> None:
    lanes = Lanes(ceiling=128)
    for n in range(3):
        lanes.add(message("ten_a", "ep_1", n), receipt=None, now=0.0)
        lanes.add(message("ten_a", "ep_2", n), receipt=None, now=0.0)

    assert hand_out(lanes, 6) == ["dlv_ep_1_0", "dlv_ep_2_0", "dlv_ep_1_1", "dlv_ep_2_1", "dlv_ep_1_2", "dlv_ep_2_2"]


def test_a_lane_whose_window_is_full_waits_and_others_go_on() -> None:
    lanes = Lanes(ceiling=128)
    queue(lanes, "ten_a", "ep_slow", 10)
    queue(lanes, "ten_b", "ep_fast")

    taken = hand_out(lanes, 20)

    slow = [t for t in taken if "ep_slow" in t]
    assert len(slow) == lanes.lanes["ep_slow"].window.size == 4  # the initial window
    assert "dlv_ep_fast_0" in taken
    assert lanes.held == 6


def test_a_freed_window_slot_puts_the_lane_back_in_turn() -> None:
    lanes = Lanes(ceiling=1)
    queue(lanes, "ten_a", "ep_a", 2)
    assert hand_out(lanes, 5) == ["dlv_ep_a_0"]
    lane = lanes.lanes["ep_a"]
    assert lanes.next_ready(0.0) is None

    lane.window.finished(Signal.ANSWERED, sent_at=0.0, now=0.01)
    lanes.wake(lane, now=0.01)

    assert hand_out(lanes, 5) == ["dlv_ep_a_1"]


def test_a_paused_lane_hands_out_nothing_until_its_pause_is_over() -> None:
    lanes = Lanes(ceiling=128)
    held = lanes.add(message("ten_a", "ep_a", 0), receipt=None, now=0.0)
    assert lanes.next_ready(now=0.0) is held
    assert lanes.pause(held, 5.0, now=0.0) == 5.0  # its rate limit is used up: first in line again
    assert lanes.next_ready(now=1.0) is None
    lanes.wake(held.lane, now=5.0)
    assert lanes.next_ready(now=5.0) is held


def test_the_newest_ladder_messages_are_the_ones_moved_out_and_a_resend_stays() -> None:
    lanes = Lanes(ceiling=128)
    queue(lanes, "ten_a", "ep_a", 5)
    lanes.add(message("ten_a", "ep_a", 5, trigger="resend"), receipt=None, now=0.0)
    queue(lanes, "ten_a", "ep_a", 2, start=6)
    lane = lanes.lanes["ep_a"]

    taken = lanes.take_newest(lane, 10)

    assert [held.message.delivery_id for held in taken] == ["dlv_ep_a_7", "dlv_ep_a_6"]
    assert lanes.held == 6 and lane.queue[-1].message.trigger == "resend"


def test_idle_lanes_are_forgotten_and_busy_ones_kept() -> None:
    lanes = Lanes(ceiling=128)
    idle = lanes.add(message("ten_a", "ep_idle", 0), receipt=None, now=0.0)
    done = lanes.next_ready(0.0)
    assert done is not None and done.slot is not None
    done.slot.release(Signal.NEUTRAL, now=0.0, allowance=0.0)
    lanes.settled(done, now=0.0)
    lanes.add(message("ten_b", "ep_busy", 0), receipt=None, now=0.0)
    assert idle.lane.endpoint_id == "ep_idle"

    lanes.forget_idle(now=0.0, after=60.0)
    dropped = lanes.forget_idle(now=61.0, after=60.0)

    assert dropped == 1 and set(lanes.lanes) == {"ep_busy"} and lanes.tenant_ids() == {"ten_b"}


def test_quick_deliveries_under_way_are_bounded_and_the_rest_wait_in_their_lanes() -> None:
    lanes = Lanes(ceiling=128, quick_budget=3, tenant_quick_budget=3)
    quick_lane(lanes, "ten_a", "ep_1", 5)
    quick_lane(lanes, "ten_a", "ep_2", 5, start_tag=100)

    taken = hand_out(lanes, 10)

    assert len(taken) == 3 and lanes.quick_under_way == 3 and lanes.held == 7


def test_settled_quick_deliveries_free_their_share_and_a_waiting_tenant_gets_the_next_turns() -> None:
    lanes = Lanes(ceiling=128, quick_budget=2, tenant_quick_budget=2)
    quick_lane(lanes, "ten_a", "ep_a", 100)
    open_windows(lanes)
    first = [lanes.next_ready(0.0), lanes.next_ready(0.0)]
    quick_lane(lanes, "ten_b", "ep_b", 1, start_tag=1000)  # arrives while A uses the whole budget
    assert lanes.next_ready(0.0) is None

    for held in first:
        assert held is not None
        lanes.settled(held, now=0.0)
    after = [lanes.next_ready(0.0), lanes.next_ready(0.0)]

    assert "dlv_ep_b_0" in [held.message.delivery_id for held in after if held is not None]
    assert lanes.quick_under_way == 2 and lanes.next_ready(0.0) is None


def test_slow_endpoints_go_on_while_the_quick_budget_is_used_up() -> None:
    lanes = Lanes(ceiling=128, quick_budget=1)
    quick_lane(lanes, "ten_a", "ep_quick", 10)
    slow_lane(lanes, "ten_b", "ep_slow", 10, start_tag=100)

    taken = hand_out(lanes, 20)

    assert sum("ep_quick" in t for t in taken) == 1
    assert sum("ep_slow" in t for t in taken) == 4  # its window (4 at first), not the quick budget
    assert lanes.quick_under_way == 1


def test_quick_and_slow_lanes_take_turns() -> None:
    lanes = Lanes(ceiling=128)
    quick_lane(lanes, "ten_a", "ep_quick", 10)
    slow_lane(lanes, "ten_a", "ep_slow", 10, start_tag=100)

    taken = hand_out(lanes, 4)

    assert ["quick" if "ep_quick" in t else "slow" for t in taken] == ["quick", "slow", "quick", "slow"]


def test_a_tenant_waits_with_claims_ahead_of_it_while_another_tenants_message_goes_out_at_once() -> None:
    lanes = Lanes(ceiling=128, claims_ahead=3)
    quick_lane(lanes, "ten_a", "ep_a1", 50)
    quick_lane(lanes, "ten_a", "ep_a2", 50, start_tag=100)
    flood = hand_out(lanes, 10)
    assert len(flood) == 3 and lanes.claiming == {"ten_a": 3}  # its claims wait for the database

    quick_lane(lanes, "ten_b", "ep_b", 1, start_tag=1000)
    held = lanes.next_ready(0.0)

    assert held is not None and held.message.delivery_id == "dlv_ep_b_0"
    assert lanes.next_ready(0.0) is None


def test_a_done_claim_lets_its_tenant_hand_out_one_more_and_its_lanes_keep_their_turns() -> None:
    lanes = Lanes(ceiling=128, claims_ahead=2)
    quick_lane(lanes, "ten_a", "ep_a1", 10)
    quick_lane(lanes, "ten_a", "ep_a2", 10, start_tag=100)
    first = [lanes.next_ready(0.0), lanes.next_ready(0.0)]
    assert lanes.next_ready(0.0) is None  # both lanes held back

    lanes.claimed(first[0], now=0.0)
    after = hand_out(lanes, 3)

    assert len(after) == 1 and lanes.claiming == {"ten_a": 2}
    lanes.claimed(first[1], now=0.0)
    assert len(hand_out(lanes, 3)) == 1
    lanes.drain()
    assert lanes.next_ready(0.0) is None and lanes.held == 0


def test_a_flooding_tenant_keeps_to_its_share_of_the_quick_budget_and_another_tenant_goes_out_at_once() -> None:
    lanes = Lanes(ceiling=128, quick_budget=4, shared_quick_budget=2)  # a tenant's share: 2, alone or not
    quick_lane(lanes, "ten_a", "ep_a1", 50)
    quick_lane(lanes, "ten_a", "ep_a2", 50, start_tag=100)
    flood = [lanes.next_ready(0.0) for _ in range(2)]
    assert lanes.next_ready(0.0) is None and lanes.quick_by_tenant == {"ten_a": 2}

    quick_lane(lanes, "ten_b", "ep_b", 1, start_tag=1000)
    held = lanes.next_ready(0.0)
    assert held is not None and held.message.delivery_id == "dlv_ep_b_0"

    assert flood[0] is not None
    lanes.settled(flood[0], now=0.0)  # one of A's is over: A may start one more
    again = lanes.next_ready(0.0)
    assert again is not None and again.lane.tenant_id == "ten_a" and lanes.next_ready(0.0) is None


def test_deliveries_under_way_in_the_whole_process_are_capped_slow_ones_included() -> None:
    lanes = Lanes(ceiling=128, quick_budget=100, max_under_way=6)
    for n in range(4):
        slow_lane(lanes, f"ten_{n}", f"ep_{n}", 10, start_tag=100 * n)

    taken = hand_out(lanes, 40)

    assert len(taken) == 6 and lanes.under_way == 6
    assert lanes.next_ready(0.0) is None


def test_a_settled_delivery_frees_its_place_under_the_cap_for_the_next_tenant_in_turn() -> None:
    lanes = Lanes(ceiling=128, max_under_way=2)
    slow_lane(lanes, "ten_a", "ep_a", 10)
    slow_lane(lanes, "ten_b", "ep_b", 10, start_tag=100)
    first, second = lanes.next_ready(0.0), lanes.next_ready(0.0)
    assert first is not None and second is not None and lanes.next_ready(0.0) is None

    lanes.settled(first, now=0.0)

    after = lanes.next_ready(0.0)
    assert after is not None and after.message.delivery_id == "dlv_ep_a_1"
    assert lanes.under_way == 2


def test_a_tenant_alone_uses_its_whole_share_and_while_another_is_active_only_the_shared_one() -> None:
    lanes = Lanes(ceiling=128, quick_budget=16, tenant_quick_budget=8, shared_quick_budget=2)
    quick_lane(lanes, "ten_a", "ep_a", 100)
    open_windows(lanes)
    alone = [lanes.next_ready(0.0) for _ in range(8)]
    assert None not in alone and lanes.next_ready(0.0) is None  # alone: its whole share, 8

    quick_lane(lanes, "ten_b", "ep_b", 1, start_tag=1000)
    b = lanes.next_ready(0.1)  # room in the budget: out at once, and b is now active
    assert b is not None and b.lane.tenant_id == "ten_b"
    for held in alone[:6]:  # six of a's end: 2 under way, as many as a may have while b is active
        assert held is not None
        lanes.settled(held, now=0.2)
    assert lanes.next_ready(0.2) is None and lanes.quick_by_tenant["ten_a"] == 2

    assert alone[6] is not None
    lanes.settled(alone[6], now=0.3)  # one more ends: one may start
    again = lanes.next_ready(0.3)
    assert again is not None and again.lane.tenant_id == "ten_a" and lanes.next_ready(0.3) is None


def test_a_tenant_gets_its_whole_share_back_once_the_other_has_been_quiet_for_the_share_window() -> None:
    lanes = Lanes(ceiling=128, quick_budget=16, tenant_quick_budget=8, shared_quick_budget=2)
    quick_lane(lanes, "ten_b", "ep_b", 1, start_tag=1000)
    assert lanes.next_ready(0.0) is not None  # b's one delivery
    quick_lane(lanes, "ten_a", "ep_a", 100)
    open_windows(lanes)
    first = [lanes.next_ready(0.5), lanes.next_ready(0.5)]
    assert None not in first and lanes.next_ready(0.5) is None  # b was active half a second ago

    later = SHARE_WINDOW_SECONDS + 0.1
    assert first[0] is not None
    lanes.settled(first[0], now=later)
    taken = [held for held in (lanes.next_ready(later) for _ in range(10)) if held is not None]

    assert len(taken) == 7 and lanes.quick_by_tenant["ten_a"] == 8


def test_a_tenant_with_only_slow_deliveries_does_not_shrink_another_tenants_share() -> None:
    lanes = Lanes(ceiling=128, quick_budget=16, tenant_quick_budget=8, shared_quick_budget=2)
    slow_lane(lanes, "ten_b", "ep_slow", 10, start_tag=1000)
    quick_lane(lanes, "ten_a", "ep_a", 100)
    open_windows(lanes)

    taken = [held for held in (lanes.next_ready(0.0) for _ in range(20)) if held is not None]

    slow = [held for held in taken if held.lane.tenant_id == "ten_b"]
    assert len(slow) == 10 and not any(held.quick for held in slow)
    assert lanes.quick_by_tenant == {"ten_a": 8}  # its whole share, as if alone


def test_a_message_handed_out_holds_a_window_slot_that_is_released_once_whoever_releases_it() -> None:
    lanes = Lanes(ceiling=128)
    lanes.add(message("ten_a", "ep_a", 0), receipt=None, now=0.0)
    held = lanes.next_ready(now=1.0)
    assert held is not None and held.slot is not None
    lane = held.lane
    assert lane.window.in_flight == 1 and list(lane.sending) == [held.slot]

    held.slot.goes_out(2.0)
    held.slot.release(Signal.ANSWERED, now=2.5, allowance=0.0)
    held.slot.release(Signal.NEUTRAL, now=3.0, allowance=0.0)  # the engine's release after the call's own

    assert lane.window.in_flight == 0 and not lane.sending
    assert lane.window.baseline == 0.5, "latency counts from when the call went out"
