"""gunicorn's threaded worker, reading each whole request in its event loop before a thread sees it.

gunicorn's ``gthread`` worker hands a connection to a thread as soon as it is readable, and
the thread then reads the head and body with no deadline: sixteen clients sending a header
line every two seconds held every thread, and every other request of the process waited.
This worker keeps gthread's event loop, threads and request handling, and changes who reads:

- The loop reads every connection without blocking (``framing.RequestReader`` says when a
  request is whole) and hands a thread only a whole request, which the thread's parser then
  reads from memory: a slow client holds a socket and its bytes, never a thread. A request
  that is not whole ``REQUEST_READ_TIMEOUT`` seconds after its first byte (or a new
  connection that sends nothing for that long) is answered 408 and closed.
- Whole requests wait for a thread in turns by client (``turns.ClientTurns``), with
  ``TENANT_MAX_CONCURRENT_REQUESTS`` of a client running at once (one while others are
  active) and 429 only past ``TENANT_MAX_WAITING_REQUESTS`` waiting. While others are
  active a client is also paced by the deliveries its requests made
  (``TENANT_SHARED_DELIVERY_RATE``), which the app leaves in the environ
  (``webhooks.api.costs``) and each thread reads back once its request is answered.
- What it refuses itself (a head over 64 KiB, a body over ``MAX_BODY_BYTES``, a malformed
  frame) and what gunicorn's parser rejects (a header over its limits: 431) are answered
  in the API's JSON error shape (``answers``), and connections close without blocking the
  loop (the unread rest is drained there, as gunicorn's graceful close does in a blocking way).
- A thread's socket has a deadline (``SOCKET_TIMEOUT``) for whatever it still does on it,
  writing the answer above all: a client that does not read its answer frees the thread then.

TLS is not supported here: terminate it in front (a load balancer), as the docs say.
"""

from __future__ import annotations

import errno
import selectors
import socket
import threading
import time
from concurrent.futures import Future
from functools import partial
from typing import Any, Callable, Iterable

from gunicorn import http
from gunicorn.workers.base import Worker
from gunicorn.workers.gthread import TConn, ThreadWorker

from webhooks import metrics
from webhooks.api.costs import COST
from webhooks.config import Settings
from webhooks.server.answers import client_error, error_answer
from webhooks.server.framing import CONTINUE, RequestReader
from webhooks.server.turns import ClientTurns
from webhooks.observability.web_spans import WHOLE_AT_NS, record_refusal

#: Bytes read from a connection at a time.
RECV_BYTES = 64 * 1024

#: Seconds a thread waits on its socket (sending the answer, mostly) before giving up on the client.
SOCKET_TIMEOUT = 10.0

#: Seconds, and bytes, a closing connection is drained of what the client still sends, so that
#: closing it does not reset the connection before the client has read its answer (RFC 9112 9.6).
LINGER_SECONDS, LINGER_BYTES = 2.0, 64 * 1024

#: How often the loop looks for connections past their deadline.
SWEEP_SECONDS = 0.25

#: Seconds a client that met ``TENANT_MAX_WAITING_REQUESTS`` is asked to wait.
WAITING_RETRY_AFTER = 1


class Connection(TConn):
    """A client connection: gunicorn's, plus the request being read, its deadline and its client."""

    def __init__(self, cfg: Any, sock: socket.socket, client: Any, server: Any, max_body: int) -> None:
        super().__init__(cfg, sock, client, server)  # the socket is non-blocking in the loop
        self.reader = RequestReader(max_body)
        self.deadline = 0.0
        self.request = b""
        self.client_key = ""
        self.started = 0.0  # when its request was handed to a thread
        self.whole_at_ns = 0  # wall time its request was whole (the start of the request's span)
        self.began_ns = time.time_ns()  # wall time its request's first byte came (a refusal's span starts then)
        self.drained = 0

    def peer(self) -> str:
        return str(self.client[0]) if isinstance(self.client, tuple) and self.client else "unix"


class BufferingWorker(ThreadWorker):
    """gthread with requests read whole in the event loop and threads handed out in turns."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        settings = Settings.from_env()
        self.read_timeout = settings.request_read_timeout
        self.max_body = settings.max_body_bytes
        self.turns: ClientTurns[Connection] = ClientTurns(
            self.cfg.threads, settings.tenant_max_concurrent_requests, settings.tenant_max_waiting_requests,
            settings.tenant_shared_delivery_rate)
        self._request = threading.local()  # each thread's current WSGI environ, for what its request cost
        self.reading: dict[Connection, None] = {}  # registered in the poller, request not whole yet
        self.closing: dict[Connection, None] = {}  # half-closed, drained until the client closes
        self._next_sweep = 0.0

    @classmethod
    def check_config(cls, cfg: Any, log: Any) -> None:
        if cfg.is_ssl:
            raise RuntimeError("the web process does not terminate TLS: put a load balancer or proxy in front")
        super().check_config(cfg, log)

    # -- the event loop ----------------------------------------------------------------------

    def accept(self, listener: socket.socket) -> None:
        try:
            sock, address = listener.accept()
        except OSError as error:
            if error.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        conn = Connection(self.cfg, sock, address, listener.getsockname(), self.max_body)
        self._read(conn, time.monotonic() + self.read_timeout)

    def _read(self, conn: Connection, deadline: float) -> None:
        """Read ``conn`` in the loop until its request is whole (at once if it already is)."""
        conn.deadline = deadline
        if conn.reader.complete:
            self._queue(conn)
            return
        self.reading[conn] = None
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_readable, conn))

    def _stop_reading(self, conn: Connection) -> None:
        self.reading.pop(conn, None)
        self._unregister(conn)

    def _unregister(self, conn: Connection) -> None:
        try:
            self.poller.unregister(conn.sock)
        except (KeyError, ValueError, OSError):
            pass

    @staticmethod
    def _receive(conn: Connection) -> bytes | None:
        """What the client sent, ``b""`` if it went away, None if nothing is there after all."""
        try:
            return conn.sock.recv(RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            return b""

    def _on_readable(self, conn: Connection, _sock: Any) -> None:
        data = self._receive(conn)
        if data is None:
            return
        if not data:  # the client went away
            self._stop_reading(conn)
            self._close(conn)
            return
        started = conn.reader.started
        refusal = conn.reader.feed(data)
        if not started and conn.reader.started:  # a kept-alive connection's next request: its own deadline
            conn.deadline = time.monotonic() + self.read_timeout
            conn.began_ns = time.time_ns()
        if conn.reader.send_continue:
            conn.reader.send_continue = False
            self._send_now(conn, CONTINUE)
        if refusal is not None:
            self._stop_reading(conn)
            self._refuse(conn, refusal.status, refusal.message)
        elif conn.reader.complete:
            self._stop_reading(conn)
            self._queue(conn)

    def _queue(self, conn: Connection) -> None:
        """A whole request: wait for its client's turn (or 429 if too many of its requests wait)."""
        head = conn.reader.head
        assert head is not None
        conn.request = conn.reader.request()
        conn.whole_at_ns = time.time_ns()
        conn.client_key = head.authorization or head.cookie or conn.peer()
        if head.acting_for and head.authorization:  # a platform key: one client per tenant it acts for
            conn.client_key += " " + head.acting_for
        if not self.turns.put(conn.client_key, conn, active=conn.client_key != conn.peer()):
            metrics.API_REFUSED.labels("waiting_requests").inc()
            self._refuse(conn, 429, f"too many requests waiting: {self.turns.max_waiting} of this client's "
                                    f"requests already wait their turn in this server process; retry in "
                                    f"{WAITING_RETRY_AFTER}s", [("Retry-After", str(WAITING_RETRY_AFTER))])
            return
        self._dispatch()

    def _dispatch(self) -> None:
        while (turn := self.turns.take()) is not None:
            turn[1].started = time.monotonic()
            self.enqueue_req(turn[1])

    def load_wsgi(self) -> None:
        """gunicorn's, then the app wrapped so that each thread keeps its request's environ (``_cost``)."""
        super().load_wsgi()
        app = self.wsgi

        def remembering(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            self._request.environ = environ
            environ[WHOLE_AT_NS] = self._request.whole_at_ns
            return app(environ, start_response)

        self.wsgi = remembering

    def _cost(self) -> int:
        """What the request this thread just served cost (``webhooks.api.costs``), 0 if it said nothing."""
        environ = getattr(self._request, "environ", None)
        self._request.environ = None
        return int(environ.get(COST, 0)) if environ else 0

    def wait_for_and_dispatch_events(self, timeout: float) -> None:
        """gthread's wait, shortened to when a client held back by its pace may run again."""
        due = self.turns.next_due()
        if due is not None:
            timeout = max(0.0, min(timeout, due - time.monotonic()))
        super().wait_for_and_dispatch_events(timeout)
        if due is not None:
            self._dispatch()

    def enqueue_req(self, conn: Connection) -> None:
        future = self.tpool.submit(self.handle, conn)
        future.add_done_callback(lambda done: self.method_queue.defer(self.finish_request, conn, done))

    def finish_request(self, conn: Connection, future: Future[tuple[bool, int]]) -> None:
        """A thread is done with ``conn``'s request: read its next one, or close it."""
        try:
            keepalive, cost = (False, 0) if future.cancelled() else future.result()
        except Exception:  # noqa: BLE001 - handle() answers its own errors
            keepalive, cost = False, 0
        self.turns.done(conn.client_key, cost, conn.started)
        if keepalive and self.alive:
            try:
                conn.sock.setblocking(False)
                read_ahead = conn.parser.unreader.take_buffered()
            except OSError:
                self._close(conn)
            else:
                conn.reader, conn.began_ns = conn.reader.next_reader(), time.time_ns()
                refusal = conn.reader.feed(read_ahead) if read_ahead else None
                if refusal is not None:
                    self._refuse(conn, refusal.status, refusal.message)
                else:
                    wait = self.read_timeout if conn.reader.started else self.cfg.keepalive
                    self._read(conn, time.monotonic() + wait)
        else:
            self._close(conn, linger=True)
        self._dispatch()

    def murder_pending(self) -> None:
        """Called by gthread's loop on every turn: end the connections past their deadline."""
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + SWEEP_SECONDS
        for conn in [c for c in self.reading if c.deadline <= now or not (self.alive or c.reader.started)]:
            self._stop_reading(conn)
            if conn.reader.started:
                self._refuse(conn, 408, f"request not received in full within {self.read_timeout:g} s")
            else:
                self._close(conn)
        for conn in [c for c in self.closing if c.deadline <= now]:
            self._close(conn)

    # -- answering and closing without blocking the loop -------------------------------------

    def _refuse(self, conn: Connection, status: int, message: str, headers: list[tuple[str, str]] | None = None) -> None:
        self.log.info("refused a request from %s: %d %s", conn.peer(), status, message)
        record_refusal(status, message, conn.peer(), conn.reader.method_and_path(), conn.began_ns)
        self._send_now(conn, error_answer(status, message, headers or []))
        self._close(conn, linger=True)

    def _send_now(self, conn: Connection, data: bytes) -> None:
        """Send a short answer without waiting: a fresh socket's buffer takes it whole."""
        try:
            conn.sock.send(data)
        except OSError:
            pass

    def _close(self, conn: Connection, linger: bool = False) -> None:
        """Close ``conn``; with ``linger``, first half-close it and drain what the client still
        sends (in the loop) until it closes, or for ``LINGER_SECONDS`` at most."""
        if self.closing.pop(conn, False) is None:  # it was lingering: registered for reading
            self._unregister(conn)
        if linger:
            try:
                conn.sock.setblocking(False)
                conn.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            else:
                conn.deadline, conn.drained = time.monotonic() + LINGER_SECONDS, 0
                self.closing[conn] = None
                self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_closing_readable, conn))
                return
        self.nr_conns -= 1
        conn.close()

    def _on_closing_readable(self, conn: Connection, _sock: Any) -> None:
        data = self._receive(conn)
        if data is None:
            return
        conn.drained += len(data)
        if not data or conn.drained >= LINGER_BYTES:
            self._close(conn)

    def handle_quit(self, sig: int, frame: Any) -> None:
        """SIGQUIT or SIGINT (a quick stop): gunicorn's base worker's, which exits at once. gthread's
        first calls ``tpool.shutdown``, which takes the pool's lock, from the signal handler: when the
        signal lands while the loop is inside ``tpool.submit`` (which holds that lock while it hands a
        request to a thread, and that thread may already have answered), the worker deadlocks until
        the arbiter kills it ``graceful_timeout`` later. Exiting needs no shutdown: idle threads end
        at the interpreter's exit, as they would after it."""
        Worker.handle_quit(self, sig, frame)

    # -- in a thread -------------------------------------------------------------------------

    def handle(self, conn: Connection) -> tuple[bool, int]:  # type: ignore[override]
        """Serve ``conn``'s whole request from memory: whether to keep the connection for another,
        and what the request cost (``webhooks.api.costs``)."""
        req = None
        keepalive = False
        try:
            conn.init()  # gunicorn's parser over the socket (made blocking), once per connection
            conn.sock.settimeout(SOCKET_TIMEOUT)
            self._request.whole_at_ns = conn.whole_at_ns
            conn.parser.unreader.unread(conn.request)
            conn.request = b""  # the parser holds it now
            req = next(conn.parser)
            keepalive = self.handle_request(req, conn)
            keepalive = keepalive and conn.parser.finish_body(deadline=time.monotonic() + SOCKET_TIMEOUT)
        except (http.errors.NoMoreData, StopIteration):
            pass
        except OSError as error:  # the client went away, or did not read its answer in time
            self.log.debug("socket error on a request from %s: %s", conn.peer(), error)
        except Exception as error:  # noqa: BLE001 - answered as gunicorn does, in JSON
            self.handle_error(req, conn.sock, conn.client, error)
        return keepalive, self._cost()

    def handle_error(self, req: Any, client: Any, addr: Any, exc: Exception) -> None:
        """gunicorn's answer to a request it could not serve, in the API's JSON shape instead of HTML."""
        found = client_error(exc, self.cfg)
        if found is None:
            self.log.exception("Error handling request %s", getattr(req, "uri", "(no URI read)"))
            status, message = 500, "internal error; it has been logged"
        else:
            status, message = found
            self.log.warning("Invalid request from ip=%s: %s", (addr or ("",))[0], exc)
        try:
            client.sendall(error_answer(status, message))
        except OSError:
            self.log.debug("Failed to send error message.")
