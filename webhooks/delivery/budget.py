"""How one worker process shares out ``WORKER_PREFETCH``: calls in flight, messages waiting, room for arrivals.

Every message a worker has taken and not yet acked counts against the broker's prefetch,
whether it waits in its lane or its call is in flight. The prefetch is split three ways:

- ``in_flight``: calls handed out at once (claimed, sent, being recorded), across every
  endpoint (``IN_FLIGHT_SHARE``; never more than the sockets the process may open);
- ``hold``: messages waiting in lanes, in memory (``HOLD_SHARE``), and as many more as the
  calls in flight leave unused of their share (``spill.Spiller.high``); beyond, the newest
  messages of the longest lanes move to the database (``spill``);
- the rest: room for messages still arriving. However busy the process, the broker can
  always hand it the next messages, so another tenant's message behind a flood reaches
  its lane, and its turn, instead of waiting in the queue.

Counting the two apart is what lets calls in flight grow to their share: were they
counted with the waiting messages against one bound, every call in flight would push a
waiting message out to the database and back. Waiting messages only borrow what calls
do not use: as calls in flight grow back into their share, the waiting messages above
``hold`` are the ones that move (a burst for one fast endpoint, drained in seconds with
128 calls in flight, no longer goes to the database and back).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Share of the prefetch that may be calls in flight, and share that may wait in lanes.
IN_FLIGHT_SHARE = 0.5
HOLD_SHARE = 0.25

#: Open files kept for everything but calls in flight (the broker, the database, logs, DNS).
RESERVED_FILES = 256


@dataclass(frozen=True)
class Budget:
    """What one worker process may have: calls in flight and messages waiting in memory."""

    prefetch: int
    #: Deliveries handed out (claimed, in flight, being recorded) at once.
    in_flight: int
    #: Messages waiting in lanes before the newest of the longest lanes move to the database.
    hold: int

    @classmethod
    def of(cls, prefetch: int, open_files: int | None = None) -> "Budget":
        """The split of ``prefetch``; ``open_files``: the process's limit on open files (each call is a socket)."""
        prefetch = max(prefetch, 1)
        in_flight = max(int(prefetch * IN_FLIGHT_SHARE), 1)
        if open_files is not None:
            in_flight = max(min(in_flight, open_files - RESERVED_FILES), 1)
        return cls(prefetch=prefetch, in_flight=in_flight, hold=max(int(prefetch * HOLD_SHARE), 1))
