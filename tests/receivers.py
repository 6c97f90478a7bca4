"""Real HTTP servers on 127.0.0.1 for tests: a recording webhook ``Receiver`` and responder builders.

Usage::

    with Receiver(sequence([500, 200])) as receiver:
        deliver_to(receiver.url + "/hook")
        (request,) = receiver.wait_for(1, timeout=5)
        assert request.headers["webhook-id"] == ...   # header lookup is case-insensitive
"""

from __future__ import annotations

import contextlib
import http.server
import itertools
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TypeAlias

#: Loopback only: tests never send traffic anywhere else.
HOST = "127.0.0.1"
#: Default time ``Receiver.wait_for`` blocks before failing the test.
DEFAULT_WAIT = 5.0
#: A body given as an iterable is streamed chunk by chunk with ``Transfer-Encoding: chunked``.
Body: TypeAlias = bytes | Iterable[bytes]
#: Response headers: a mapping, or ``(name, value)`` pairs when a name must repeat.
Headers: TypeAlias = Mapping[str, str] | Sequence[tuple[str, str]]
#: What a responder answers: ``(status, headers or None, body)``.
Response: TypeAlias = tuple[int, Headers | None, Body]


class HeaderDict(dict[str, str]):
    """Request headers: keys stored lowercased, lookups case-insensitive; repeated headers joined with ", "."""

    def __getitem__(self, name: str) -> str:
        return super().__getitem__(name.lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and super().__contains__(name.lower())

    def __setitem__(self, name: str, value: str) -> None:
        super().__setitem__(name.lower(), value)

    def get(self, name: str, default: str | None = None) -> str | None:  # type: ignore[override]
        return super().get(name.lower(), default)


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the receiver saw it (recorded before the responder runs)."""

    method: str
    path: str
    headers: HeaderDict
    body: bytes
    received_at: float  # time.monotonic()
    received_at_wall: float  # time.time()
    client_address: tuple[str, int]  # same port across requests => the client kept the connection alive


Responder: TypeAlias = Callable[[RecordedRequest], Response]

_local = threading.local()


def pause(seconds: float) -> None:
    """Sleep inside a responder, but wake up early when the receiver is stopped."""
    stopping: threading.Event | None = getattr(_local, "stopping", None)
    if stopping is None:
        time.sleep(seconds)
    else:
        stopping.wait(seconds)


def _is_stopping() -> bool:
    stopping: threading.Event | None = getattr(_local, "stopping", None)
    return stopping is not None and stopping.is_set()


def always(status: int, headers: Headers | None = None, body: bytes = b"") -> Responder:
    """Answer every request the same way."""

    def respond(request: RecordedRequest) -> Response:
        return status, headers, body

    return respond


def sequence(responses: Sequence[Response | int | Responder]) -> Responder:
    """Answer with each item in turn, then keep repeating the last.

    An item is a ``(status, headers, body)`` tuple, a bare ``int`` status, or another responder
    (e.g. ``sequence([sleep_then(2.0, 200), 200])``).
    """
    if not responses:
        raise ValueError("sequence() needs at least one response")
    items = list(responses)
    lock = threading.Lock()
    position = itertools.count()

    def respond(request: RecordedRequest) -> Response:
        with lock:
            item = items[min(next(position), len(items) - 1)]
        if isinstance(item, int):
            return item, None, b""
        if callable(item):
            return item(request)
        return item

    return respond


def sleep_then(seconds: float, status: int = 200, body: bytes = b"ok") -> Responder:
    """Wait ``seconds`` before answering (a slow endpoint)."""

    def respond(request: RecordedRequest) -> Response:
        pause(seconds)
        return status, None, body

    return respond


def drip(interval: float, chunk: bytes = b".", status: int = 200, count: int | None = None) -> Responder:
    """Send headers at once, then one ``chunk`` every ``interval`` seconds (forever if ``count`` is None)."""

    def chunks() -> Iterator[bytes]:
        for _ in itertools.count() if count is None else range(count):
            if _is_stopping():
                return
            yield chunk
            pause(interval)

    def respond(request: RecordedRequest) -> Response:
        return status, None, chunks()

    return respond


@contextlib.contextmanager
def raw_server(behaviour: Callable[[socket.socket, threading.Event], None]) -> Iterator[int]:
    """A bare TCP server on 127.0.0.1 running ``behaviour(conn, stop)`` for each connection; yields the port.

    For answers no HTTP server would give (garbage, headers that never end, a TLS handshake).
    """
    listener = socket.create_server((HOST, 0))
    listener.settimeout(0.05)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                with contextlib.suppress(OSError):
                    behaviour(conn, stop)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=2)
        listener.close()


def unused_port() -> int:
    """A loopback port nothing listens on (bound then released), for "connection refused" cases."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


class _Server(http.server.ThreadingHTTPServer):
    allow_reuse_address = True
    daemon_threads = True  # a handler stuck in a slow responder never blocks shutdown
    #: Pending connections the kernel queues: the worker opens dozens at once as an
    #: endpoint's window grows, and socketserver's default of 5 would refuse some.
    request_queue_size = 1024
    receiver: Receiver

    def handle_error(self, request: object, client_address: object) -> None:
        # Clients hanging up mid-response (timeouts are the point of many tests) are not errors;
        # anything else (e.g. a responder bug) is still printed.
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)) or self.receiver._stopping.is_set():
            return
        super().handle_error(request, client_address)  # type: ignore[arg-type]


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive; every response therefore carries a length or is chunked
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        pass  # quiet test output

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without this, Nagle's algorithm and
        # delayed ACKs add ~40 ms to every response that has a body.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.receiver._opened(self.connection)

    def finish(self) -> None:
        self.server.receiver._closed(self.connection)
        try:
            super().finish()
        except OSError:
            pass  # flushing to a client that already left

    def _handle(self) -> None:
        receiver = self.server.receiver
        _local.stopping = receiver._stopping
        request = RecordedRequest(
            method=self.command,
            path=self.path,
            headers=self._headers(),
            body=self._read_body(),
            received_at=time.monotonic(),
            received_at_wall=time.time(),
            client_address=(str(self.client_address[0]), int(self.client_address[1])),
        )
        receiver._record(request)
        status, headers, body = receiver.responder(request)
        if receiver._stopping.is_set():
            # Stopped while the responder ran (it was woken from ``pause``): a server that went
            # down sends no answer, it drops the connection.
            self.close_connection = True
            return
        try:
            pairs = list(headers.items() if isinstance(headers, Mapping) else headers or ())
            self._respond(status, pairs, body)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True  # the client gave up (e.g. it timed out)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _handle

    def _headers(self) -> HeaderDict:
        headers = HeaderDict()
        for name, value in self.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        return headers

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            body = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                        pass
                    return bytes(body)
                body += self.rfile.read(size)
                self.rfile.readline()  # CRLF after each chunk
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _respond(self, status: int, headers: list[tuple[str, str]], body: Body) -> None:
        self.send_response(status)
        names = {name.lower() for name, _ in headers}
        for name, value in headers:
            self.send_header(name, value)
        if isinstance(body, (bytes, bytearray)):
            if "content-length" not in names:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for piece in body:
            if piece:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
        if self.server.receiver._stopping.is_set():
            self.close_connection = True  # cut off mid-body, as a dying server would
            return
        self.wfile.write(b"0\r\n\r\n")


class Receiver:
    """A webhook receiver on 127.0.0.1:<ephemeral port> that records every request.

    Starts serving on construction; use as a context manager (or call ``stop()``).
    ``responder`` may be reassigned while running to change how it answers. After ``stop()``
    the port is closed and kept-alive client connections are cut, like a server going down.
    """

    def __init__(self, responder: Responder | None = None) -> None:
        self.responder: Responder = responder or always(200, None, b"ok")
        self._requests: list[RecordedRequest] = []
        self._changed = threading.Condition()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._server = _Server((HOST, 0), _Handler)
        self._server.receiver = self
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"receiver-{self.port}",
            daemon=True,
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """Base URL without a trailing slash, e.g. ``http://127.0.0.1:41234``."""
        return f"http://{HOST}:{self.port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of the requests received so far, in arrival order."""
        with self._changed:
            return list(self._requests)

    def wait_for(self, n: int, timeout: float = DEFAULT_WAIT) -> list[RecordedRequest]:
        """Block until at least ``n`` requests arrived and return them all; AssertionError on timeout."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self._requests) >= n, timeout):
                raise AssertionError(
                    f"expected {n} request(s) at {self.url} within {timeout:g} s, got {len(self._requests)}"
                )
            return list(self._requests)

    def clear(self) -> None:
        """Forget the requests recorded so far."""
        with self._changed:
            self._requests.clear()

    def stop(self) -> None:
        """Stop serving, free the port and cut open connections; idempotent. Wakes responders in ``pause``."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        with self._changed:
            connections = list(self._connections)
        for connection in connections:
            # Handler threads idle on keep-alive connections would otherwise keep answering.
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(timeout=5)

    def __enter__(self) -> Receiver:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # -- called from handler threads --

    def _record(self, request: RecordedRequest) -> None:
        with self._changed:
            self._requests.append(request)
            self._changed.notify_all()

    def _opened(self, connection: socket.socket) -> None:
        with self._changed:
            self._connections.add(connection)

    def _closed(self, connection: socket.socket) -> None:
        with self._changed:
            self._connections.discard(connection)
