"""One endpoint's lane in a worker process: its waiting messages (``Held``), its concurrency
window with the calls in flight (``Slot``), its pace and its late calls (``Lane``).

``webhooks.delivery.lanes`` serves the lanes in turns by tenant; this module is the state of
one lane and the one object (``Slot``) that takes and gives back a place in its window.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from webhooks.delivery.receipt import Receipt
from webhooks.delivery.window import Signal, Window
from webhooks.messaging.messages import DeliveryMessage

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
