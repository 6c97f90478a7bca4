"""Slow clients: connections that send a request a little at a time, as a slowloris attack does.

``SlowClients(host, port, count, kind)`` opens ``count`` connections and, from one thread,
sends each the next piece of its request every ``interval`` seconds: a header line
(``kind="headers"``: ``GET /healthz`` whose head never ends), or one byte of a body
(``kind="body"``: ``POST /v1/events`` announcing ``BODY_BYTES``). Used by the web process's
tests and by the slow-client step of the benchmark.
"""

from __future__ import annotations

import socket
import threading
from types import TracebackType

#: The body a ``kind="body"`` client announces (and never finishes sending).
BODY_BYTES = 4096


class SlowClients:
    """``count`` connections dribbling a request until ``close``; ``answers`` holds what the server sent back."""

    def __init__(self, host: str, port: int, count: int, kind: str = "headers", interval: float = 0.5,
                 api_key: str | None = None) -> None:
        if kind not in ("headers", "body"):
            raise ValueError(f"kind is 'headers' or 'body' (got {kind!r})")
        self.address, self.count, self.kind, self.interval, self.api_key = (host, port), count, kind, interval, api_key
        self.sockets: list[socket.socket] = []
        self.answers: list[bytes] = []  # what the server answered to those it closed
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._dribble, name="slow-clients", daemon=True)

    def __enter__(self) -> SlowClients:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def start(self) -> None:
        for _ in range(self.count):
            sock = socket.create_connection(self.address, timeout=10)
            sock.sendall(self._opening())
            self.sockets.append(sock)
        self._thread.start()

    def open(self) -> int:
        """How many of the connections the server has not closed."""
        return len(self.sockets)

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        for sock in self.sockets:
            sock.close()
        self.sockets = []

    def _opening(self) -> bytes:
        if self.kind == "headers":
            return b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
        auth = f"Authorization: Bearer {self.api_key}\r\n".encode() if self.api_key else b""
        return (b"POST /v1/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + auth
                + f"Content-Length: {BODY_BYTES}\r\n\r\n".encode() + b'{"event_type": "slow", "payload": {"x": "')

    def _dribble(self) -> None:
        sent = 0
        while not self._stop.wait(self.interval):
            sent += 1
            piece = f"X-Slow-{sent}: {sent}\r\n".encode() if self.kind == "headers" else b"x"
            for sock in list(self.sockets):
                try:
                    sock.sendall(piece)
                except OSError:
                    self._closed_by_server(sock)

    def _closed_by_server(self, sock: socket.socket) -> None:
        sock.settimeout(1)
        try:
            self.answers.append(sock.recv(4096))
        except OSError:
            self.answers.append(b"")
        self.sockets.remove(sock)
        sock.close()
