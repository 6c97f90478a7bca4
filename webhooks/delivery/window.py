"""Adaptive concurrency per endpoint: how many calls one endpoint may have in flight here.

Congestion control for a webhook receiver, in the manner of TCP's: the window starts
small (``INITIAL_WINDOW``) and doubles while calls succeed and latency holds (slow
start), though no faster than once per ``slow_after()``: it never grows more than
twofold before a call sent at the new size could have shown itself slow. After the first
sign of trouble it grows by one per round trip, or per ``GROWTH_INTERVAL_SECONDS`` for a
receiver that answers faster than that. Once latency has told where the receiver gives
way, and told it twice (it gave way there again a second or more later, after a whole
window of calls had answered in time below it), the window climbs back to just below
that level quickly, and probes past it only every ``PROBE_INTERVAL_SECONDS``: a
receiver that falls off a cliff when it holds too many calls (every call slow while
one is) costs a stall per probe, so probes must be rare. Latency that gave way once may have been the machine's (a worker starting
on a busy host is slow for a second whatever it calls): past that level the window keeps
growing by one per round trip, and once it has doubled past it with no call slow, the
level is forgotten and slow start resumes.
A timeout, a connection error or a 5xx halves it, though a failure that came back
as fast as a normal call (a receiver that answers ``500`` in milliseconds is not
overloaded by a handful of calls) keeps at least ``LATENCY_FLOOR``: pinned at one call,
each of a fast-failing endpoint's retries would wait for the one before it, claim and
record included. A ``429``, ``503`` or ``408`` (the
receiver says it has too much) halves it down to one. Latency well above the
endpoint's baseline brings it back to just below the number of calls that were in
flight when the slow call was sent (the level at which the receiver gave way), or
halves it when a call sent after the last cut is slow before any answered in time
(the window had overshot, and just below that level is still too many), but
never cuts it by more than half, nor below ``LATENCY_FLOOR``. Only one cut per round trip: the calls that were
already under way when the window was cut report the same overload again, and must
not cut it twice. A call outstanding far longer than the baseline counts as slow
before it returns, so a receiver that falls off a cliff (answers in 2 s instead of
20 ms once it holds too many calls) is backed off within a fraction of a second, not
after its slow answers come back. The window grows only while it is used up: an
endpoint with a trickle of events keeps a small one.

The baseline is the lowest latency seen over the last ``BASELINE_SECONDS``, so an
endpoint that becomes permanently slower is judged against its new normal within
about that time. A call is slow only beyond the baseline's tolerance plus an
``allowance`` the caller hands in: the worker's own event-loop delay at the time
(``lag.LoopLag``), which is no sign of the receiver's capacity. Pure arithmetic on
times handed in: no clock, no I/O.
"""

from __future__ import annotations

import enum
import math

from webhooks.delivery.http_result import OVERLOAD_STATUSES, is_server_error

#: Window of an endpoint nobody has measured yet.
INITIAL_WINDOW = 4

#: The window never goes below this: a failing endpoint still gets its retries.
MIN_WINDOW = 1

#: Latency alone, or a failure that came back quickly, never cuts the window below this
#: (slow failures and refusals still do): a receiver that
#: answers slowly with a handful of calls in flight is not being overloaded by them, and
#: at this size the slowness is as likely the worker's own (a busy loop), which must not
#: starve an endpoint with a trickle of events.
LATENCY_FLOOR = INITIAL_WINDOW

#: A call slower than ``baseline * LATENCY_TOLERANCE + LATENCY_SLACK_SECONDS`` is a sign of overload.
LATENCY_TOLERANCE = 2.0
LATENCY_SLACK_SECONDS = 0.05

#: After the first cut the window grows by one at most this often (seconds), and at most once per round trip.
GROWTH_INTERVAL_SECONDS = 0.25

#: Growth at or past the level where latency last gave way, at most this often (seconds).
PROBE_INTERVAL_SECONDS = 5.0

#: Latency giving way again at least this long (seconds) after it first did confirms the level (not one stall of the host).
CONFIRM_AFTER_SECONDS = 1.0

#: How much of the window a failure keeps, and the least a slow answer keeps.
FAILURE_CUT = 0.5
SLOW_CUT = 0.5

#: Before any call has answered (no baseline), a failure within this many seconds came back quickly.
QUICK_FAILURE_SECONDS = 1.0

#: The baseline is the fastest call seen over about this many seconds (two half-periods).
BASELINE_SECONDS = 60.0


class Signal(enum.Enum):
    """What one finished call says about the receiver's capacity."""

    #: Answered (2xx, 3xx, or a 4xx that is not about load).
    ANSWERED = "answered"
    #: Timeout, connection error, 5xx: the receiver is overloaded, broken or down.
    FAILED = "failed"
    #: 429, 503, 408: the receiver says it has too much.
    REFUSED = "refused"
    #: Nothing learnt about capacity (the call never reached the receiver: blocked, bad URL).
    NEUTRAL = "neutral"


def signal_of(status_code: int | None, error_class: str | None) -> Signal:
    """Judge one call for the window: overloaded, answered, or nothing learnt."""
    if status_code is None:
        if error_class is None:  # a destination without HTTP statuses took it
            return Signal.ANSWERED
        return Signal.FAILED if error_class in ("timeout", "connection", "tls", "protocol") else Signal.NEUTRAL
    if status_code in OVERLOAD_STATUSES:
        return Signal.REFUSED
    if is_server_error(status_code):
        return Signal.FAILED
    if error_class == "timeout":  # a status came, then the body stalled past the deadline
        return Signal.FAILED
    return Signal.ANSWERED


class Window:
    """The concurrency window of one endpoint in one worker process."""

    __slots__ = ("limit", "ceiling", "threshold", "in_flight", "cuts", "_used", "_last_cut", "_next_growth",
                 "_gave_way", "_gave_way_since", "_confirmed", "_in_time", "_double_to", "_double_after",
                 "_min_now", "_min_before", "_bucket_end")

    def __init__(self, ceiling: int) -> None:
        self.ceiling = max(MIN_WINDOW, ceiling)
        self.limit = float(min(INITIAL_WINDOW, self.ceiling))
        #: Slow start runs until the window reaches this (the ceiling, until the first cut).
        self.threshold = float(self.ceiling)
        self.in_flight = 0
        #: Cuts so far (metrics).
        self.cuts = 0
        #: The window was full since calls last drained to none: growing it is worth it.
        self._used = False
        self._last_cut = -math.inf
        self._next_growth = -math.inf
        #: Calls in flight when latency last gave way (None: it never has, or it was forgotten).
        self._gave_way: int | None = None
        #: When latency first gave way since the level was last confirmed or forgotten.
        self._gave_way_since = -math.inf
        #: Latency gave way there again a while later, after a window of calls had answered in time below it.
        self._confirmed = False
        #: Calls sent since the last cut that answered in time.
        self._in_time = 0
        #: Slow start grows up to ``_double_to``, and doubles again only after ``_double_after``.
        self._double_to = 0.0
        self._double_after = -math.inf
        self._min_now = math.inf
        self._min_before = math.inf
        self._bucket_end = -math.inf

    @property
    def size(self) -> int:
        """Calls that may be in flight at once."""
        return max(MIN_WINDOW, min(self.ceiling, int(self.limit)))

    def has_room(self) -> bool:
        return self.in_flight < self.size

    @property
    def baseline(self) -> float | None:
        """The fastest recent call, in seconds (None before the first answer)."""
        fastest = min(self._min_now, self._min_before)
        return None if fastest == math.inf else fastest

    def slow_after(self, allowance: float = 0.0) -> float | None:
        """Seconds after which a call counts as slow (None while there is no baseline), ``allowance`` included."""
        baseline = self.baseline
        return None if baseline is None else baseline * LATENCY_TOLERANCE + LATENCY_SLACK_SECONDS + allowance

    @property
    def last_cut(self) -> float:
        """When the window was last cut (calls sent before then no longer count)."""
        return self._last_cut

    def set_ceiling(self, ceiling: int) -> None:
        """A new ceiling (``ENDPOINT_MAX_IN_FLIGHT`` shared among a different number of workers)."""
        self.ceiling = max(MIN_WINDOW, ceiling)
        self.limit = min(self.limit, float(self.ceiling))
        self.threshold = min(self.threshold, float(self.ceiling))

    def started(self) -> int:
        """One more call in flight; how many are in flight with it (its level)."""
        self.in_flight += 1
        if self.in_flight >= self.size:
            self._used = True
        return self.in_flight

    def finished(
        self, signal: Signal, sent_at: float, now: float, level: int | None = None, allowance: float = 0.0
    ) -> None:
        """One call started at ``sent_at`` (with ``level`` calls in flight) ended at ``now`` with ``signal``;
        ``allowance``: how much of its latency may be the worker's own delay."""
        used = self._used
        self.in_flight -= 1
        if self.in_flight <= 0:
            self._used = False
        if signal is Signal.NEUTRAL:
            return
        latency = now - sent_at
        if signal is not Signal.ANSWERED:
            quick = signal is Signal.FAILED and self._quick(latency, allowance)
            to = max(self.limit * FAILURE_CUT, min(self.limit, LATENCY_FLOOR if quick else MIN_WINDOW))
            if to < self.limit:
                self._cut(to, sent_at, now)
            return
        slow_after = self.slow_after(allowance)
        self._observe(latency, now)
        if slow_after is not None and latency > slow_after:
            self._slow(sent_at, now, level)
            return
        if sent_at > self._last_cut:
            self._in_time += 1
        if used:
            self._grow(now, allowance)

    def _quick(self, latency: float, allowance: float) -> bool:
        """A failure that took no longer than a normal call (``QUICK_FAILURE_SECONDS`` before any answered)."""
        slow_after = self.slow_after(allowance)
        return latency <= (QUICK_FAILURE_SECONDS + allowance if slow_after is None else slow_after)

    def overdue(self, sent_at: float, now: float, level: int | None = None) -> None:
        """A call started at ``sent_at`` (at ``level``) is still unanswered at ``now``, past ``slow_after()``: cut now."""
        self._slow(sent_at, now, level)

    def _slow(self, sent_at: float, now: float, level: int | None) -> None:
        # Slow again with no call answered in time since the last cut: just below the level was not
        # low enough (the window had overshot: in slow start, or while the host's own delay hid latency).
        again_at_once = self._last_cut > -math.inf and self._in_time == 0
        below = self.limit * SLOW_CUT if level is None or again_at_once else level - 1
        to = max(min(self.limit - 1, max(below, self.limit * SLOW_CUT)), min(self.limit, LATENCY_FLOOR))
        # A second stall, not the rest of the first: a call sent a while after latency first gave way,
        # and a window's worth answered in time below that level since the last cut.
        again = (self._gave_way is not None and self._in_time >= self._gave_way - 1
                 and sent_at >= self._gave_way_since + CONFIRM_AFTER_SECONDS)
        if to < self.limit and self._cut(to, sent_at, now) and level is not None and not again_at_once:
            # (A halving says the window had overshot, not where the receiver gives way: the level stays.)
            if self._gave_way is None or self._confirmed:
                self._gave_way_since = now
            self._confirmed = again
            self._gave_way = level

    def _grow(self, now: float, allowance: float) -> None:
        if self.limit < self.threshold:
            # Slow start: one more per answer (about double per round trip), up to twice the
            # size of the last doubling until that size could have been judged.
            if self.limit >= self._double_to:
                if now < self._double_after:
                    return
                self._double_to = self.limit * 2
                self._double_after = now + (self.slow_after(allowance) or 0.0)
            self.limit += 1.0
        elif now >= self._next_growth:
            self.limit += 1.0
            if self._gave_way is not None and not self._confirmed and self.limit >= 2 * self._gave_way:
                # Twice the level where latency gave way once, and nothing slow since: not the receiver's limit.
                self._gave_way, self.threshold = None, float(self.ceiling)
            probing = self._confirmed and self._gave_way is not None and self.limit >= self._gave_way - 1
            pause = PROBE_INTERVAL_SECONDS if probing else GROWTH_INTERVAL_SECONDS
            self._next_growth = now + max(self.baseline or 0.0, pause)
        self.limit = min(self.limit, float(self.ceiling))

    def _cut(self, to: float, sent_at: float, now: float) -> bool:
        """Cut to ``to`` unless this call started before the last cut; whether it did."""
        if sent_at <= self._last_cut:
            return False  # started before the last cut: the same overload, already answered
        self.limit = max(float(MIN_WINDOW), to)
        self.threshold = self.limit
        self._last_cut = now
        self._in_time = 0
        self.cuts += 1
        return True

    def _observe(self, latency: float, now: float) -> None:
        if now >= self._bucket_end:
            self._min_before, self._min_now = self._min_now, math.inf
            self._bucket_end = now + BASELINE_SECONDS / 2
        self._min_now = min(self._min_now, latency)
