"""A fast webhook receiver for benchmarks: asyncio, HTTP/1.1 keep-alive, 10,000+ connections at once (it raises
its open-files limit). ``python -m bench.kit.receiver PORT``, or ``start(port)`` in a thread of this process.

Paths choose the answer, so one receiver serves every contender of ``bench/run.py``:

- ``/fail…``: ``500``; ``/hang…``: no answer, the connection is held; ``/slow/<ms>/…``: ``200`` after ``ms``;
- ``/climb/<threshold>/<low_ms>/<high_ms>/…``: ``200`` after ``low_ms`` while at most ``threshold`` calls to this
  path are in flight (the new one included); beyond, the delay climbs linearly to ``high_ms`` at
  ``2 × threshold`` (an endpoint behind a fixed pool of workers);
- ``/flaky…``: the first ``flaky_failures(webhook-id)`` requests for one ``webhook-id`` on one path get ``500``,
  the same on every run (half succeed at once, a quarter on the second request, an eighth on the third, an
  eighth never), so a retry ladder's tiers and its dead-letter queue are used;
- anything else: ``200 ok`` at once.

Every request is recorded: arrival, ``webhook-id``, path, the requests to that path in flight when it arrived
(itself included), and when it was answered or its client gave up. ``/_bench/stats``, ``/_bench/timeline`` (a
line per request: ``timeline.parse_timeline``) and ``/_bench/reset`` give them (``receiver_process.Receiver``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import resource
import sys
import threading
import time
from collections import deque
from urllib.parse import parse_qs, urlsplit

RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"
FAILURE = b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\r\nfail"

#: Path prefixes with a behaviour of their own.
FAIL_PREFIX = b"/fail"
HANG_PREFIX = b"/hang"
SLOW_PREFIX = b"/slow/"
CLIMB_PREFIX = b"/climb/"
FLAKY_PREFIX = b"/flaky"

#: ``flaky_failures`` of a ``webhook-id`` that never succeeds.
NEVER = 1_000_000


def flaky_failures(webhook_id: bytes) -> int:
    """How many requests for ``webhook_id`` a ``/flaky`` path fails before it answers 200."""
    first = hashlib.sha256(webhook_id).digest()[0]
    return 0 if first < 128 else 1 if first < 192 else 2 if first < 224 else NEVER

CONTROL_PREFIX = b"/_bench/"

#: Outcomes of a recorded request (the ``timeline`` column).
PENDING, ANSWERED, ABANDONED = b"p", b"a", b"x"

#: Pending connections the listening socket queues (the kernel caps it at ``net.core.somaxconn``):
#: a sender opening thousands of connections at once must not see SYNs dropped.
LISTEN_BACKLOG = 16384


def delay_seconds(path: bytes, in_flight: int) -> float:
    """How long to wait before answering a request to ``path`` that arrived with ``in_flight`` requests to that
    path outstanding (itself included); 0 for an immediate answer (tests/test_bench_receiver.py has examples)."""
    if path.startswith(SLOW_PREFIX):
        return int(path.split(b"/")[2]) / 1000
    if path.startswith(CLIMB_PREFIX):
        threshold, low, high = (int(part) for part in path.split(b"/")[2:5])
        excess = min(1.0, max(0, in_flight - threshold) / threshold)
        return (low + (high - low) * excess) / 1000
    return 0.0


def raise_open_files_limit() -> int:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit; returns the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class Counter:
    """Every request received (control requests excepted), in arrival order."""

    def __init__(self) -> None:
        self.count = 0
        self.webhook_ids: list[bytes] = []
        #: ``time.time()`` and path of each arrival.
        self.wall: list[float] = []
        self.paths: list[bytes] = []
        self.by_path: dict[bytes, int] = {}
        #: Per request: requests to its path in flight when it arrived (itself included),
        #: ``time.time()`` it was answered or abandoned, and which of the two.
        self.in_flight_at_arrival: list[int] = []
        self.ended: list[float] = []
        self.outcomes: list[bytes] = []
        #: Requests outstanding now, per path and in all.
        self.in_flight: dict[bytes, int] = {}
        self.in_flight_total = 0
        #: Changes on every reset, so that a request recorded before it is not finished after it.
        self.epoch = object()
        #: Requests so far per (path, webhook-id), for ``/flaky`` paths.
        self.seen: dict[tuple[bytes, bytes], int] = {}

    def record(self, path: bytes, webhook_id: bytes) -> int:
        """Count an arriving request as in flight; returns its index for ``finish``."""
        self.count += 1
        self.wall.append(time.time())
        self.webhook_ids.append(webhook_id)
        self.paths.append(path)
        self.by_path[path] = self.by_path.get(path, 0) + 1
        in_flight = self.in_flight.get(path, 0) + 1
        self.in_flight[path] = in_flight
        self.in_flight_total += 1
        self.in_flight_at_arrival.append(in_flight)
        self.ended.append(0.0)
        self.outcomes.append(PENDING)
        return self.count - 1

    def finish(self, epoch: object, index: int, outcome: bytes) -> None:
        """The request at ``index`` (recorded in ``epoch``) was answered, or its client went away, just now."""
        if epoch is not self.epoch or self.outcomes[index] != PENDING:
            return  # recorded before a reset, or already finished
        self.outcomes[index] = outcome
        self.ended[index] = time.time()
        path = self.paths[index]
        self.in_flight[path] -= 1
        self.in_flight_total -= 1

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]

    def stats(self) -> bytes:
        paths = {path.decode(errors="replace"): n for path, n in self.by_path.items()}
        return json.dumps({"total": self.count, "paths": paths, "in_flight": self.in_flight_total}).encode()

    def timeline(self, prefix: bytes, exact: bool) -> bytes:
        lines = [
            b"%.6f %s %s %d %s %s" % (self.wall[i], b"-" if self.outcomes[i] == PENDING else b"%.6f" % self.ended[i],
                                      self.outcomes[i], self.in_flight_at_arrival[i], self.webhook_ids[i] or b"-", p)
            for i, p in enumerate(self.paths)
            if (p == prefix if exact else p.startswith(prefix))
        ]
        return b"\n".join(lines) + (b"\n" if lines else b"")


def _answer(body: bytes, content_type: bytes = b"application/json") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nContent-Type: %s\r\n\r\n%s" % (len(body), content_type, body)


class _Reply:
    """One answer owed on a connection, in request order (HTTP/1.1 answers in order)."""

    __slots__ = ("epoch", "index", "data", "timer")

    def __init__(self, epoch: object, index: int) -> None:
        self.epoch, self.index = epoch, index
        self.data: bytes | None = None
        self.timer: asyncio.TimerHandle | None = None


class _Protocol(asyncio.Protocol):
    def __init__(self, counter: Counter) -> None:
        self.counter = counter
        self.buffer = b""
        self.hung = False
        #: Answers owed, oldest first; a delayed one holds back those after it.
        self.owed: deque[_Reply] = deque()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        for reply in self.owed:
            if reply.timer is not None:
                reply.timer.cancel()
            self.counter.finish(reply.epoch, reply.index, ABANDONED)
        self.owed.clear()

    def data_received(self, data: bytes) -> None:
        if self.hung:
            return  # a held connection never answers; whatever else comes is ignored
        self.buffer += data
        while True:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buffer[:head_end]
            request_line, _, header_block = head.partition(b"\r\n")
            length = 0
            webhook_id = b""
            for line in header_block.lower().split(b"\r\n"):
                if line.startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
                elif line.startswith(b"webhook-id:"):
                    webhook_id = line.split(b":", 1)[1].strip()
            total = head_end + 4 + length
            if len(self.buffer) < total:
                return
            self.buffer = self.buffer[total:]
            parts = request_line.split(b" ")
            target = parts[1] if len(parts) > 1 else b"/"
            path = target.split(b"?", 1)[0]
            if path.startswith(CONTROL_PREFIX):
                self.transport.write(self._control(parts[0], target))  # type: ignore[attr-defined]
                continue
            index = self.counter.record(path, webhook_id)
            reply = _Reply(self.counter.epoch, index)
            self.owed.append(reply)
            if path.startswith(HANG_PREFIX):
                self.hung = True  # answered never; abandoned when the client closes
                return
            answer = RESPONSE if self._succeeds(path, webhook_id) else FAILURE
            delay = delay_seconds(path, self.counter.in_flight[path])
            if delay > 0:
                reply.timer = asyncio.get_running_loop().call_later(delay, self._ready, reply, answer)
            else:
                self._ready(reply, answer)

    def _succeeds(self, path: bytes, webhook_id: bytes) -> bool:
        if path.startswith(FAIL_PREFIX):
            return False
        if path.startswith(FLAKY_PREFIX):
            key = (path, webhook_id)
            earlier = self.counter.seen.get(key, 0)
            self.counter.seen[key] = earlier + 1
            return earlier >= flaky_failures(webhook_id)
        return True

    def _ready(self, reply: _Reply, answer: bytes) -> None:
        reply.data, reply.timer = answer, None
        while self.owed and self.owed[0].data is not None:
            done = self.owed.popleft()
            self.transport.write(done.data)  # type: ignore[attr-defined, arg-type]
            self.counter.finish(done.epoch, done.index, ANSWERED)

    def _control(self, method: bytes, target: bytes) -> bytes:
        url = urlsplit(target.decode(errors="replace"))
        query = parse_qs(url.query)
        if url.path == "/_bench/stats":
            return _answer(self.counter.stats())
        if url.path == "/_bench/timeline":
            exact = "path" in query
            wanted = (query.get("path") or query.get("prefix") or ["/"])[0].encode()
            return _answer(self.counter.timeline(wanted, exact), b"text/plain")
        if url.path == "/_bench/reset" and method == b"POST":
            self.counter.reset()
            return _answer(b'{"reset": true}')
        return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"


async def serve(port: int, counter: Counter, ready: threading.Event | None = None) -> None:
    """Serve on 127.0.0.1:``port`` until cancelled."""
    raise_open_files_limit()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Protocol(counter), "127.0.0.1", port, backlog=LISTEN_BACKLOG)
    if ready is not None:
        ready.set()
    async with server:
        await server.serve_forever()


def start(port: int) -> Counter:
    """Serve on 127.0.0.1:``port`` in a daemon thread; returns the live counter."""
    counter = Counter()
    ready = threading.Event()
    threading.Thread(target=lambda: asyncio.run(serve(port, counter, ready)), daemon=True).start()
    ready.wait(5)
    return counter


if __name__ == "__main__":
    try:
        asyncio.run(serve(int(sys.argv[1]) if sys.argv[1:] else 9999, Counter()))
    except KeyboardInterrupt:
        sys.exit(0)
