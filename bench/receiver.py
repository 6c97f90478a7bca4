"""A fast webhook receiver for benchmarks: asyncio, HTTP/1.1 keep-alive, answers 200.

Run standalone (``python bench/receiver.py PORT``) or start it in a thread with
``start(port)``; it counts requests so a benchmark can tell when all arrived.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time

RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"


class Counter:
    def __init__(self) -> None:
        self.count = 0
        self.arrivals: list[float] = []
        self.webhook_ids: list[bytes] = []


class _Protocol(asyncio.Protocol):
    def __init__(self, counter: Counter) -> None:
        self.counter = counter
        self.buffer = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buffer[:head_end].lower()
            length = 0
            webhook_id = b""
            for line in head.split(b"\r\n"):
                if line.startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
                elif line.startswith(b"webhook-id:"):
                    webhook_id = line.split(b":", 1)[1].strip()
            total = head_end + 4 + length
            if len(self.buffer) < total:
                return
            self.buffer = self.buffer[total:]
            self.counter.count += 1
            self.counter.arrivals.append(time.monotonic())
            self.counter.webhook_ids.append(webhook_id)
            self.transport.write(RESPONSE)  # type: ignore[attr-defined]


def start(port: int) -> Counter:
    """Serve on 127.0.0.1:``port`` in a daemon thread; returns the live counter."""
    counter = Counter()
    ready = threading.Event()

    def serve() -> None:
        loop = asyncio.new_event_loop()
        server = loop.run_until_complete(loop.create_server(lambda: _Protocol(counter), "127.0.0.1", port, backlog=1024))
        ready.set()
        loop.run_until_complete(server.serve_forever())

    threading.Thread(target=serve, daemon=True).start()
    ready.wait(5)
    return counter


if __name__ == "__main__":
    counter = start(int(sys.argv[1]) if len(sys.argv) > 1 else 9999)
    while True:
        time.sleep(5)
        print(f"{counter.count} requests", flush=True)
