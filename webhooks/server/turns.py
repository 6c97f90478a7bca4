"""Whole requests waiting for a thread of the web process, handed out in turns by client.

A web process runs requests on a few threads (``WEB_THREADS``). First come, first served,
one client's burst of concurrent requests takes every thread and another client's request
waits behind all of it; refusing the burst (429) refuses ordinary parallel senders. So a
whole request waits here, without a thread, for its client's turn: the next thread goes to the client
with the fewest requests running (a client that has none goes before a burst's next
request), clients with as many in turns, in the order they came; a client runs at most ``share_alone`` requests at
once, and only one while another client has sent a request within the last second
(``webhooks.turns.RecentTenants``), since a process runs Python one thread at a time and a flood's requests
running side by side take that many shares of it. Only a client with ``max_waiting``
requests already waiting is refused, at once, without anything being done.

A client is whoever holds a credential (``webhooks.server.worker`` names it): an API key
is one client, whatever tenant it belongs to; a request with no credential (a health check,
a scrape) is its peer address's, and does not shrink anyone's share. The clients with requests
waiting take turns in a ``webhooks.turns.Rotation``. Used by the server's event loop only: no locks.
"""

from __future__ import annotations

import time
from typing import Callable, Generic, TypeVar

from webhooks.turns import RecentTenants, Rotation, count_down

T = TypeVar("T")


class ClientTurns(Generic[T]):
    """Requests waiting by client; ``take`` gives the next one to run, ``done`` says one ended.

    ``threads``: how many run at once in all. ``share_alone``: how many of one client's run
    at once while it is alone (0: as many as there are threads, alone or not).
    ``max_waiting``: how many of one client's may wait (0: no bound). ``shared_rate``: the
    work (deliveries) a client may cause per second while another client is active (0: no
    pace); what a request cost is told with ``done``, and its client's next request waits
    until that work, at this rate, is paid for.
    """

    def __init__(self, threads: int, share_alone: int, max_waiting: int, shared_rate: float = 0.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if threads < 1:
            raise ValueError(f"at least one thread (got {threads})")
        self.threads, self.share_alone, self.max_waiting = threads, share_alone, max_waiting
        self.shared_rate = shared_rate
        self.running = 0
        #: Clients paced by what their requests cost: monotonic time before which their next may not run.
        self._not_before: dict[str, float] = {}
        self._clock = clock
        #: Requests waiting by client, clients in turn order; one at its share is held out of turn until ``done``.
        self._waiting: Rotation[str, T] = Rotation()
        self._running: dict[str, int] = {}
        self._seen = RecentTenants()

    def put(self, client: str, request: T, active: bool = True) -> bool:
        """Queue ``request`` for its client's turn; False (nothing queued) if the client has
        ``max_waiting`` waiting already. ``active``: the request makes its client one that
        shrinks others' share (not so a health check or a scrape, which names no one)."""
        if self.max_waiting and self._waiting.waiting(client) >= self.max_waiting:
            return False
        self._waiting.put(client, request)
        if active:
            self._seen.seen(client, self._clock())
        return True

    def take(self) -> tuple[str, T] | None:
        """The next request to run and its client, counted as running; None while every thread
        runs one, or when no client with a request waiting may run one more.

        Of the clients below their share, the one with the fewest running goes; ties in turn
        order. A scan of the clients with requests waiting: a handful, not thousands."""
        if self.running >= self.threads:
            return None
        now = self._clock()
        chosen, fewest = None, self.threads
        for client in self._waiting.in_turn():
            running = self._running.get(client, 0)
            if running >= self.share(client, now):
                self._waiting.hold(client)  # back in with ``done``
            elif running < fewest and self._not_before.get(client, now) <= now:
                chosen, fewest = client, running
        if chosen is None:
            return None
        _, request = self._waiting.take(chosen)  # type: ignore[misc]  # (chosen has one waiting)
        self._running[chosen] = fewest + 1
        self.running += 1
        return chosen, request

    def done(self, client: str, cost: int = 0, started: float | None = None) -> None:
        """A running request of ``client`` ended, having caused ``cost`` work: its next one may go
        in its turn, once that work is paid for at ``shared_rate`` if others are active.

        The pace counts from when the request ``started`` (default: now): the time it ran is
        part of what pays for it, so a client that the work itself holds back is not paced twice.
        """
        count_down(self._running, client)
        self.running -= 1
        now = self._clock()
        if cost and self.shared_rate and self._seen.others_active(client, now):
            since = now if started is None else started
            self._not_before[client] = max(since, self._not_before.get(client, since)) + cost / self.shared_rate
        elif self._not_before.get(client, now) <= now:
            self._not_before.pop(client, None)
        self._waiting.resume(client)

    def next_due(self) -> float | None:
        """When the earliest client held back by its pace may run again (None: nobody is held back).

        Only times still to come: a client whose pace is paid for goes when a thread, or its
        share, frees (the server's loop must not wake at once, again and again, for it)."""
        now = self._clock()
        for client in [c for c, at in self._not_before.items() if at <= now]:
            del self._not_before[client]  # paid for: nothing to keep of it
        due = [at for client, at in self._not_before.items() if self._waiting.waiting(client)]
        return min(due) if due else None

    def share(self, client: str, now: float) -> int:
        """How many of ``client``'s requests may run at once now."""
        if not self.share_alone:
            return self.threads
        return 1 if self._seen.others_active(client, now) else self.share_alone

    def waiting(self, client: str) -> int:
        return self._waiting.waiting(client)
