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

from typing import Any, Iterator

from webhooks.delivery.lane import Held, Lane, Slot
from webhooks.delivery.receipt import Receipt
from webhooks.messaging.messages import DeliveryMessage
from webhooks.turns import SHARE_WINDOW_SECONDS, RecentTenants, Rotation, count_down

#: Deliveries to quick endpoints under way at once in one process (``Lanes.quick_budget``).
QUICK_BUDGET = 512

#: How many of one tenant's messages may be handed out ahead of their claims (two of the
#: engine's claim batches: a tenant's message waits for at most the batch running and its own).
CLAIMS_AHEAD = 256

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
