"""A fast webhook receiver for benchmarks: asyncio, HTTP/1.1 keep-alive, answers 200.

Run standalone (``python bench/receiver.py PORT``; it prints the request count every
5 seconds, ``--quiet`` does not) or start it in a thread with ``start(port)``; it
counts requests so a benchmark can tell when all arrived.

Paths choose the answer, so one receiver serves every contender of ``bench/run.py``:

- ``/fail…``: ``500`` (an endpoint that fails on purpose: ladder fidelity);
- ``/hang…``: no answer at all, the connection is held (an endpoint that always times out);
- anything else: ``200 ok``.

Every request is recorded as (wall-clock arrival time, path, ``webhook-id``), so a
benchmark in another process can compute rates and latencies. Control requests, never
counted, under ``/_bench/``:

- ``GET /_bench/stats``: JSON ``{"total": n, "paths": {path: n}}``;
- ``GET /_bench/dump?path=/x``: one line per recorded request, ``<unix time> <webhook-id> <path>``
  (every path when ``path`` is absent);
- ``POST /_bench/reset``: forget every record.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
from urllib.parse import parse_qs, urlsplit

RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"
FAILURE = b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\nContent-Type: text/plain\r\n\r\nfail"

#: Path prefixes with a behaviour of their own.
FAIL_PREFIX = b"/fail"
HANG_PREFIX = b"/hang"
CONTROL_PREFIX = b"/_bench/"


class Counter:
    """Every request received (control requests excepted), in arrival order."""

    def __init__(self) -> None:
        self.count = 0
        #: ``time.monotonic()`` of each arrival (in-process benchmarks).
        self.arrivals: list[float] = []
        self.webhook_ids: list[bytes] = []
        #: ``time.time()`` and path of each arrival (benchmarks in other processes).
        self.wall: list[float] = []
        self.paths: list[bytes] = []
        self.by_path: dict[bytes, int] = {}

    def record(self, path: bytes, webhook_id: bytes) -> None:
        self.count += 1
        self.arrivals.append(time.monotonic())
        self.wall.append(time.time())
        self.webhook_ids.append(webhook_id)
        self.paths.append(path)
        self.by_path[path] = self.by_path.get(path, 0) + 1

    def reset(self) -> None:
        self.__init__()  # type: ignore[misc]

    def stats(self) -> bytes:
        paths = {path.decode(errors="replace"): n for path, n in self.by_path.items()}
        return json.dumps({"total": self.count, "paths": paths}).encode()

    def dump(self, path: bytes | None) -> bytes:
        lines = [
            b"%.6f %s %s" % (wall, webhook_id or b"-", p)
            for wall, webhook_id, p in zip(self.wall, self.webhook_ids, self.paths)
            if path is None or p == path
        ]
        return b"\n".join(lines) + (b"\n" if lines else b"")


def _answer(body: bytes, content_type: bytes = b"application/json") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nContent-Type: %s\r\n\r\n%s" % (len(body), content_type, body)


class _Protocol(asyncio.Protocol):
    def __init__(self, counter: Counter) -> None:
        self.counter = counter
        self.buffer = b""
        self.hung = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

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
            self.counter.record(path, webhook_id)
            if path.startswith(HANG_PREFIX):
                self.hung = True
                return
            self.transport.write(FAILURE if path.startswith(FAIL_PREFIX) else RESPONSE)  # type: ignore[attr-defined]

    def _control(self, method: bytes, target: bytes) -> bytes:
        url = urlsplit(target.decode(errors="replace"))
        if url.path == "/_bench/stats":
            return _answer(self.counter.stats())
        if url.path == "/_bench/dump":
            wanted = parse_qs(url.query).get("path")
            return _answer(self.counter.dump(wanted[0].encode() if wanted else None), b"text/plain")
        if url.path == "/_bench/reset" and method == b"POST":
            self.counter.reset()
            return _answer(b'{"reset": true}')
        return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"


async def serve(port: int, counter: Counter, ready: threading.Event | None = None) -> None:
    """Serve on 127.0.0.1:``port`` until cancelled."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Protocol(counter), "127.0.0.1", port, backlog=1024)
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


async def _main(port: int, quiet: bool) -> None:
    counter = Counter()
    server = asyncio.create_task(serve(port, counter))
    while not server.done():
        await asyncio.sleep(5)
        if not quiet:
            print(f"{counter.count} requests", flush=True)
    await server


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("port", nargs="?", type=int, default=9999)
    parser.add_argument("--quiet", action="store_true", help="do not print the count every 5 seconds")
    args = parser.parse_args()
    try:
        asyncio.run(_main(args.port, args.quiet))
    except KeyboardInterrupt:
        sys.exit(0)
