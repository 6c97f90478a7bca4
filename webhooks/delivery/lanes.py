"""Fair share inside one worker process: a lane per endpoint, served round-robin by tenant.

Every message taken from the primary queue waits in its endpoint's lane (first in,
first out) until the endpoint's concurrency window has room and no rate-limit pause
holds it. ``next_ready`` hands out work one message at a time, tenant by tenant and,
within a tenant, endpoint by endpoint, so a tenant with 10,000 messages waiting gets
one turn like a tenant with one, and a slow endpoint's backlog holds only its own
lane. Lanes live in memory up to a bound; beyond it the engine moves the newest
messages of the longest lanes to the database (``spill``) and fetches them back when
the lane runs short. Nothing here does I/O or knows about time except through the
numbers it is handed.

Taking turns at the hand-out only helps if what is handed out does not then queue
somewhere first come, first served. It would: in the database batches and in the
event loop's own queue of callbacks, where every delivery under way takes a turn. A
call to a quick receiver is nearly all such turns (claim, request, answer, record,
ack), so deliveries under way to quick endpoints share ``quick_budget``; beyond it,
their lanes wait here, in turn, and a tenant with one event finds a loop that turns
round in milliseconds instead of one queued with another tenant's thousands. A call to
a slow endpoint spends its time waiting for the answer, which costs the loop nothing,
so it does not count: thousands of those can be under way, up to ``max_under_way`` for
the whole process (``budget.Budget.in_flight``). Quick and slow lanes take turns in two
rings, served alternately, so that neither kind holds up the other.

One tenant may use only a share of ``quick_budget`` (``tenant_quick_budget``, half of it
unless told) and have at most ``claims_ahead`` messages handed out before their claims
are done; a lane of a tenant at either limit is held back, out of turn, until one of
its tenant's claims or deliveries is over. A flood therefore never takes every slot,
and another tenant's message is handed out the moment it arrives, into the next claim
batch, instead of when the flood's next batch ends.

Handed out is not yet done: the other tenant's delivery then takes its turns in the
event loop beside every one of the flood's under way (Little's law: the time each waits
is the work under way over the rate it is done). So, as the web tier does with its
requests (``webhooks.server.turns``), a tenant's share shrinks while it is not alone:
while another tenant has had a quick delivery handed out here within
``SHARE_WINDOW_SECONDS``, a tenant may have ``shared_quick_budget`` quick deliveries under
way (an eighth of the budget unless told). Only quick deliveries count as activity: a
call that waits seconds for its receiver hardly notices a loop running late, and a
tenant with slow endpoints is nearly always about. A tenant alone keeps its whole share, so a single tenant's
throughput is as before; a flood shares the process with a trickle at a fraction of the
work under way, and the trickle's delivery waits for a fraction of the loop's queue. The
flood pays for it: its claim and record batches are smaller, and in the flood benchmark
it drained 10-35 % slower while the other tenant was active.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterator

from webhooks.delivery.receipt import Receipt
from webhooks.delivery.window import Signal, Window
from webhooks.messaging.messages import DeliveryMessage
from webhooks.turns import SHARE_WINDOW_SECONDS, RecentTenants, Rotation, count_down

#: Deliveries to quick endpoints under way at once in one process (``Lanes.quick_budget``).
QUICK_BUDGET = 512

#: How many of one tenant's messages may be handed out ahead of their claims (two of the
#: engine's claim batches: a tenant's message waits for at most the batch running and its own).
CLAIMS_AHEAD = 256

#: Weight of the latest second in a lane's smoothed pace.
PACE_WEIGHT = 0.3

#: An endpoint whose fastest recent answer came within this many seconds is a quick one
#: (so is one not measured yet): its deliveries under way count against ``quick_budget``.
QUICK_SECONDS = 0.1


class Slot:
    """One call's place in its endpoint's window, from hand-out to release.

    ``Lanes.next_ready`` takes it with the message it hands out; ``release`` gives it back
    exactly once, telling the window what the call said: the attempt releases it when its
    call ends, and the engine releases whatever is left when the delivery is over, whatever
    happened meanwhile (as dramatiq frees work in a ``finally``). Only slots write
    ``Lane.sending``.
    """

    __slots__ = ("lane", "sent_at", "level", "held")

    def __init__(self, lane: "Lane", now: float) -> None:
        self.lane = lane
        #: Loop time the call was sent (the hand-out until it is).
        self.sent_at = now
        #: Calls in flight with this one when it was taken (the level at which a slow answer says the receiver gave way).
        self.level = lane.window.started()
        #: Not yet released.
        self.held = True
        lane.sending[self] = None

    def goes_out(self, now: float) -> None:
        """The call goes out now (after its claim and signing): its latency counts from here."""
        self.sent_at = now

    def release(self, signal: Signal, now: float, allowance: float) -> bool:
        """Give the slot back; whether the window was cut for it (False when it was released already)."""
        if not self.held:
            return False
        self.held = False
        del self.lane.sending[self]
        window = self.lane.window
        cuts = window.cuts
        window.finished(signal, self.sent_at, now, self.level, allowance)
        return window.cuts > cuts


@dataclass(eq=False)
class Held:
    """One message in this process: in a lane, then in flight, until it is settled."""

    message: DeliveryMessage
    #: How to ack, requeue or move it with the broker (None: taken back from the database).
    receipt: Receipt | None
    lane: "Lane" = field(repr=False)
    #: Handed out as a quick delivery: it holds a share of ``Lanes.quick_budget`` until settled.
    quick: bool = False
    #: Its window slot while handed out (``Lanes.next_ready`` takes it).
    slot: Slot | None = None
    #: Loop time it joined its lane (how long it waited there: the attempt's span says).
    queued_at: float = 0.0

    def ack(self) -> None:
        """Done with: ack it with the broker (one taken back from the database has nothing to ack)."""
        if self.receipt is not None:
            self.receipt.ack()


class Lane:
    """One endpoint's messages waiting in this process, and its window.

    Each attribute has one writer: ``Lanes`` (the queue, ``ready``, ``idle_since``, the pause,
    the count of settled messages), ``Slot`` (``sending`` and the window's calls in flight), the
    lane's own methods (its pace, its late calls), ``spill`` (``spilled``) and the engine
    (``watch``, its timer); everyone else asks.
    """

    __slots__ = ("endpoint_id", "tenant_id", "queue", "window", "paused_until", "spilled",
                 "sending", "idle_since", "ready", "finished", "pace", "pace_since", "watch")

    def __init__(self, endpoint_id: str, tenant_id: str, ceiling: int) -> None:
        self.endpoint_id = endpoint_id
        self.tenant_id = tenant_id
        self.queue: deque[Held] = deque()
        self.window = Window(ceiling)
        #: Loop time until which nothing is sent (rate limit); 0 when not paused.
        self.paused_until = 0.0
        #: Some of this endpoint's backlog waits in the database.
        self.spilled = False
        #: Calls in flight, oldest first (an ordered set: only ``Slot`` adds and removes).
        self.sending: dict[Slot, None] = {}
        #: Loop time since which the lane is empty with nothing in flight (lanes are dropped later).
        self.idle_since: float | None = None
        #: The lane is in its tenant's ring of lanes with work to hand out (quick or slow).
        self.ready = False
        #: Messages settled since the pace was last measured, and the pace (per second, smoothed;
        #: None until a whole second was measured, from ``pace_since``, a housekeeping round).
        self.finished = 0
        self.pace: float | None = None
        self.pace_since: float | None = None
        #: The timer that looks for calls outstanding far longer than the baseline (None: none set).
        self.watch: Any = None

    def can_send(self, now: float) -> bool:
        return bool(self.queue) and self.window.has_room() and self.paused_until <= now

    def measure_pace(self, now: float, round_seconds: float) -> None:
        """Smooth the lane's pace with the last round's (a round is ``round_seconds`` long). A new lane
        is measured from its first round on, and its first whole round is taken as it is: a part of a
        second, or a pace smoothed from nothing (a new lane draining 1,000 messages/s would count as
        draining 300), would make it keep too little (``spill.Spiller.keep``) and send its backlog to
        the database and back."""
        if self.pace_since is None:
            self.pace_since = now
        elif self.pace is None:
            self.pace = self.finished / max(now - self.pace_since, round_seconds)
        else:
            self.pace = (1 - PACE_WEIGHT) * self.pace + PACE_WEIGHT * self.finished / round_seconds
        self.finished = 0

    def check_late(self, now: float, allowance: float) -> tuple[float | None, bool]:
        """Look at the oldest call in flight: a call far slower than the baseline cuts the window
        before it even returns. When to look again (None: no call to watch), and whether it cut."""
        window = self.window
        slow_after = window.slow_after(allowance)
        if slow_after is None:
            return None, False
        # Calls sent before the last cut say nothing new; the next call sent sets a new watch.
        counted = [(slot.sent_at, slot.level) for slot in self.sending if slot.sent_at > window.last_cut]
        if not counted:
            return None, False
        sent, level = min(counted)
        if now - sent < slow_after:
            return sent + slow_after, False
        cuts = window.cuts
        window.overdue(sent, now, level)
        return None, window.cuts > cuts

    @property
    def quick(self) -> bool:
        """Does this endpoint answer quickly (or is it not measured yet)?"""
        baseline = self.window.baseline
        return baseline is None or baseline < QUICK_SECONDS

    @property
    def held(self) -> int:
        """Messages waiting (not in flight)."""
        return len(self.queue)


class Lanes:
    """Every lane of this process and the round-robin over them."""

    def __init__(self, ceiling: int, quick_budget: int = QUICK_BUDGET, claims_ahead: int = CLAIMS_AHEAD,
                 tenant_quick_budget: int | None = None, max_under_way: int | None = None,
                 shared_quick_budget: int | None = None) -> None:
        self.ceiling = ceiling
        self.lanes: dict[str, Lane] = {}
        #: Messages waiting in every lane (not in flight).
        self.held = 0
        #: How many deliveries (to any endpoint) may be under way at once, and how many are.
        self.max_under_way = max(1, max_under_way) if max_under_way is not None else None
        self.under_way = 0
        #: How many deliveries to quick endpoints may be under way at once, and how many are ...
        self.quick_budget = max(1, quick_budget)
        self.quick_under_way = 0
        #: ... and how many of one tenant's (half the budget unless told): a flood keeps a share
        #: free, so another tenant's message goes out at once instead of when a slot frees.
        self.tenant_quick_budget = max(1, tenant_quick_budget or self.quick_budget // 2)
        self.quick_by_tenant: dict[str, int] = {}
        #: ... and how many while another tenant is active (an eighth of the budget unless told).
        self.shared_quick_budget = min(self.tenant_quick_budget, max(1, shared_quick_budget or self.quick_budget // 8))
        #: Tenants with quick deliveries handed out within ``SHARE_WINDOW_SECONDS``.
        self._recent = RecentTenants(SHARE_WINDOW_SECONDS)
        #: How many of one tenant's messages may be handed out before their claim is done, and
        #: how many are, by tenant. Per tenant, not in all: a flood's claims wait in the
        #: database batches, and another tenant's message goes straight to the next batch.
        self.claims_ahead = max(1, claims_ahead)
        self.claiming: dict[str, int] = {}
        #: Lanes of a tenant at ``claims_ahead``, out of turn until one of its claims is done
        #: (``ready`` stays set, so ``wake`` leaves them there).
        self._held_back: dict[str, list[Lane]] = {}
        #: Lanes with work to hand out, in turns by tenant (then each tenant's lanes in turn), one ring
        #: of each kind.
        self._quick: Rotation[str, Lane] = Rotation()
        self._slow: Rotation[str, Lane] = Rotation()
        #: The slow ring has the next turn when both kinds could send.
        self._slow_next = False

    def lane(self, endpoint_id: str, tenant_id: str) -> Lane:
        lane = self.lanes.get(endpoint_id)
        if lane is None:
            lane = self.lanes[endpoint_id] = Lane(endpoint_id, tenant_id, self.ceiling)
        return lane

    def add(self, message: DeliveryMessage, receipt: Receipt | None, now: float, front: bool = False) -> Held:
        """Queue a message in its endpoint's lane (at the front: it was there first)."""
        lane = self.lane(message.endpoint_id, message.tenant_id)
        held = Held(message, receipt, lane, queued_at=now)
        if front:
            lane.queue.appendleft(held)
        else:
            lane.queue.append(held)
        lane.idle_since = None
        self.held += 1
        self.wake(lane, now)
        return held

    def put_back(self, held: Held, now: float) -> None:
        """A message taken by ``next_ready`` that could not be sent yet: first in its lane again."""
        held.lane.queue.appendleft(held)
        self.held += 1
        self.wake(held.lane, now)

    def pause(self, held: Held, seconds: float, now: float) -> float:
        """The endpoint's rate limit is used up: ``held`` goes back first in its lane, and the lane
        sends nothing for ``seconds``; the loop time it may send again (``wake`` it then)."""
        lane = held.lane
        lane.paused_until = max(lane.paused_until, now + seconds)
        self.put_back(held, now)
        return lane.paused_until

    def wake(self, lane: Lane, now: float) -> None:
        """Put ``lane`` in the rotation if it can send now."""
        if lane.ready or not lane.can_send(now):
            return
        lane.ready = True
        (self._quick if lane.quick else self._slow).put(lane.tenant_id, lane)

    def next_ready(self, now: float) -> Held | None:
        """The next message to send, with its window slot, taking turns by tenant, then by endpoint; None if none can go.
        Quick lanes wait (in turn) while the quick budget is used up; slow lanes go on, up to
        ``max_under_way`` deliveries under way in all."""
        if self.max_under_way is not None and self.under_way >= self.max_under_way:
            return None
        while True:
            quick_room = self.quick_under_way < self.quick_budget
            if quick_room and self._quick and not (self._slow_next and self._slow):
                turns, quick = self._quick, True
            elif self._slow:
                turns, quick = self._slow, False
            else:
                return None
            self._slow_next = quick
            tenant_id, lane = turns.take()  # type: ignore[misc]  # (the ring is not empty)
            claiming = self.claiming.get(tenant_id, 0)
            tenant_quick = self.quick_by_tenant.get(tenant_id, 0) if quick else 0
            if claiming >= self.claims_ahead or (quick and tenant_quick >= self.quick_share(tenant_id, now)):
                self._held_back.setdefault(tenant_id, []).append(lane)  # ready stays set
                continue
            lane.ready = False
            if not lane.can_send(now):
                continue
            held = lane.queue.popleft()
            self.held -= 1
            held.quick = quick
            if quick:
                self.quick_under_way += 1
                self.quick_by_tenant[tenant_id] = tenant_quick + 1
            self.claiming[tenant_id] = claiming + 1
            self.under_way += 1
            if quick:
                self._recent.seen(tenant_id, now)
            self.wake(lane, now)  # to the back of its tenant's turn, if it can send again
            held.slot = Slot(lane, now)
            return held

    def quick_share(self, tenant_id: str, now: float) -> int:
        """How many quick deliveries ``tenant_id`` may have under way now: its whole share alone,
        ``shared_quick_budget`` while another tenant is active."""
        return self.shared_quick_budget if self._recent.others_active(tenant_id, now) else self.tenant_quick_budget

    def claimed(self, held: Held, now: float) -> None:
        """The claim of a message handed out by ``next_ready`` is done (whatever its outcome):
        its tenant may have one more handed out; lanes held back for it take their turns again."""
        tenant_id = held.lane.tenant_id
        count_down(self.claiming, tenant_id)
        self._release(tenant_id, now)

    def _release(self, tenant_id: str, now: float) -> None:
        """Lanes held back for ``tenant_id``'s claims or quick share take their turns again."""
        for lane in self._held_back.pop(tenant_id, ()):
            lane.ready = False
            self.wake(lane, now)

    def settled(self, held: Held, now: float) -> None:
        """A delivery handed out by ``next_ready`` is over: its share of the budgets is free."""
        self.under_way -= 1
        held.lane.finished += 1
        if held.quick:
            held.quick = False
            self.quick_under_way -= 1
            count_down(self.quick_by_tenant, held.lane.tenant_id)
            self._release(held.lane.tenant_id, now)

    def take_newest(self, lane: Lane, count: int) -> list[Held]:
        """Remove up to ``count`` of the lane's newest waiting ladder messages (to move them to the
        database); a resend or a message with a ``not_before`` stops the taking (it stays)."""
        taken: list[Held] = []
        while lane.queue and len(taken) < count:
            newest = lane.queue[-1].message
            if newest.trigger != "ladder" or newest.not_before is not None:
                break
            taken.append(lane.queue.pop())
        self.held -= len(taken)
        return taken

    def longest(self) -> list[Lane]:
        """Lanes by waiting messages, longest first."""
        return sorted((lane for lane in self.lanes.values() if lane.queue), key=lambda lane: len(lane.queue), reverse=True)

    def drain(self) -> list[Held]:
        """Empty every lane (a stop, or a lost broker session); the messages taken out."""
        taken = [held for lane in self.lanes.values() for held in lane.queue]
        for lane in self.lanes.values():
            lane.queue.clear()
            lane.ready = False
        self._quick.clear()
        self._slow.clear()
        self._held_back.clear()
        self.held = 0
        return taken

    def forget_idle(self, now: float, after: float) -> int:
        """Drop lanes idle (nothing waiting, in flight or spilled) for ``after`` seconds; how many."""
        dropped = 0
        for endpoint_id, lane in list(self.lanes.items()):
            busy = lane.queue or lane.sending or lane.spilled or lane.paused_until > now
            if busy:
                lane.idle_since = None
                continue
            if lane.idle_since is None:
                lane.idle_since = now
            elif now - lane.idle_since >= after:
                del self.lanes[endpoint_id]
                dropped += 1
        return dropped

    def tenant_ids(self) -> set[str]:
        """Tenants with a lane here."""
        return {lane.tenant_id for lane in self.lanes.values()}

    def set_ceiling(self, ceiling: int) -> None:
        self.ceiling = ceiling
        for lane in self.lanes.values():
            lane.window.set_ceiling(ceiling)

    def __iter__(self) -> Iterator[Lane]:
        return iter(self.lanes.values())

    def stats(self) -> dict[str, Any]:
        return {"lanes": len(self.lanes), "held": self.held, "under_way": self.under_way,
                "quick_under_way": self.quick_under_way, "claiming": sum(self.claiming.values()),
                "in_flight": sum(lane.window.in_flight for lane in self.lanes.values())}
