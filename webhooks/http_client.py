"""Outbound HTTP for webhook delivery: one pooled httpx client per Sender, SSRF-checked at socket connect.

Every network problem becomes an ``HttpResult`` with an ``error_class``; ``Sender.post`` does not raise for them.
"""

from __future__ import annotations

import http.cookiejar
import ipaddress
import socket
import ssl
import threading
import time
import typing
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from types import TracebackType

import httpcore
import httpx

from webhooks.netguard import BlockedAddress, Resolver, TargetPolicy, UnresolvableHost, resolve

#: Largest error message kept in an HttpResult (messages end up in delivery logs).
MAX_ERROR_CHARS = 300
#: Error classes an HttpResult may carry (``None`` means no error).
ERROR_CLASSES = frozenset({"timeout", "connection", "dns", "tls", "blocked_address", "protocol", "pool_timeout"})


@dataclass(frozen=True)
class HttpResult:
    """What happened when calling a webhook URL; a response may exist even when ``error_class`` is set
    (e.g. the deadline expired while its body was still arriving)."""

    status_code: int | None
    headers: dict[str, str]
    body: bytes
    duration_ms: float
    error_class: str | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error_class is None and self.status_code is not None and 200 <= self.status_code < 300


class _Budget:
    """The total time one ``post`` may spend on the network.

    The clock starts at the first network operation, i.e. once the pool has handed out a connection,
    so time spent queueing for a busy pool is reported as ``pool_timeout`` rather than eating into
    (and being blamed on) the endpoint's allowance.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline: float | None = None

    def clamp(self, timeout: float | None, expired: type[Exception]) -> float:
        """``timeout`` shortened to what is left; raises ``expired`` once nothing is left."""
        now = time.monotonic()
        if self.deadline is None:
            self.deadline = now + self.seconds
        remaining = self.deadline - now
        if remaining <= 0:
            # Never hand 0 to a socket: settimeout(0) means non-blocking, not "timed out".
            raise expired(f"total deadline of {self.seconds:g} s exceeded")
        return remaining if timeout is None else min(timeout, remaining)

    def exhausted(self) -> bool:
        # A few ms of slack: a socket timeout set to the remainder fires at about the deadline.
        return self.deadline is not None and time.monotonic() >= self.deadline - 0.005


#: The budget of the ``post`` running in this thread. httpx's sync client does all I/O in the calling
#: thread, so pooled connections shared between threads always see their current user's budget.
_budget: ContextVar[_Budget | None] = ContextVar("webhooks_http_budget", default=None)


def _clamp(timeout: float | None, expired: type[Exception]) -> float | None:
    budget = _budget.get()
    return timeout if budget is None else budget.clamp(timeout, expired)


class TLSFailure(Exception):
    """A TLS handshake or record failed (bad certificate, wrong protocol, ...)."""


def _raise_if_tls(exc: Exception) -> None:
    # httpcore wraps ssl errors in ConnectError/ReadError, and its pool later drops __cause__,
    # so recognise them here, while the original exception is still attached.
    cause = exc.__cause__ or (exc.args[0] if exc.args else None)
    if isinstance(cause, ssl.SSLError):
        raise TLSFailure(str(cause)) from exc


class _DeadlineStream(httpcore.NetworkStream):
    """A network stream whose every read, write and TLS handshake respects the call's total budget."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            return self._inner.read(max_bytes, _clamp(timeout, httpcore.ReadTimeout))
        except httpcore.ReadError as exc:
            _raise_if_tls(exc)
            raise

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        try:
            self._inner.write(buffer, _clamp(timeout, httpcore.WriteTimeout))
        except httpcore.WriteError as exc:
            _raise_if_tls(exc)
            raise

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        # server_hostname is the URL's host name (not the IP we connected to): SNI and
        # certificate verification therefore stay correct.
        try:
            inner = self._inner.start_tls(ssl_context, server_hostname, _clamp(timeout, httpcore.ConnectTimeout))
        except httpcore.ConnectError as exc:
            _raise_if_tls(exc)
            raise
        return _DeadlineStream(inner)

    def get_extra_info(self, info: str) -> typing.Any:
        return self._inner.get_extra_info(info)


class GuardedBackend(httpcore.NetworkBackend):
    """httpcore network backend that resolves once, checks every address, then connects to the checked IP.

    Connecting to the IP we checked (instead of letting the socket layer resolve the name again) is
    what defeats DNS rebinding. httpcore keeps using the original host name for the Host header and
    TLS (SNI, certificate), so both stay correct.
    """

    def __init__(self, policy: TargetPolicy, resolver: Resolver | None = None) -> None:
        self._policy = policy
        self._resolver = resolver
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        addresses = self._resolve(host, port, _clamp(timeout, httpcore.ConnectTimeout))
        # Any bad answer blocks the host: a mix of public and internal answers is a rebinding smell.
        for address in addresses:
            self._policy.check_ip(host, address)
        options = list(socket_options or ())
        error: Exception | None = None
        for address in addresses:  # like socket.create_connection: first address that accepts wins
            try:
                stream = self._inner.connect_tcp(
                    address,
                    port,
                    timeout=_clamp(timeout, httpcore.ConnectTimeout),
                    local_address=local_address,
                    socket_options=options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
                continue
            return _DeadlineStream(stream)
        assert error is not None  # resolve() never returns an empty list
        raise error

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are not webhook targets")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def _resolve(self, host: str, port: int, timeout: float | None) -> list[str]:
        """``resolve`` bounded by ``timeout``: getaddrinfo has no timeout of its own."""
        try:
            ipaddress.ip_address(host)
            return [host]  # IP literal: nothing to look up
        except ValueError:
            pass
        if timeout is None:
            return resolve(host, port, self._resolver)
        outcome: list[list[str] | BaseException] = []
        done = threading.Event()

        def lookup() -> None:
            try:
                outcome.append(resolve(host, port, self._resolver))
            except BaseException as exc:  # handed over to the waiting thread
                outcome.append(exc)
            finally:
                done.set()

        # A daemon thread per lookup: a hung lookup is abandoned (it ends with the resolver's own
        # timeout) instead of holding up the delivery or interpreter exit.
        threading.Thread(target=lookup, name="webhooks-dns", daemon=True).start()
        if not done.wait(timeout):
            raise httpcore.ConnectTimeout(f"DNS lookup of {host} timed out")
        result = outcome[0]
        if isinstance(result, BaseException):
            raise result
        return result


class GuardedTransport(httpx.HTTPTransport):
    """``httpx.HTTPTransport`` whose connection pool connects through a ``GuardedBackend``.

    httpx 0.28 exposes no parameter for httpcore's ``network_backend``, so the pool that
    ``HTTPTransport.__init__`` built (never used, no connections) is replaced by an identically
    configured ``httpcore.ConnectionPool`` that has the backend. ``handle_request``/``close`` are
    inherited unchanged, including httpx's httpcore-to-httpx exception mapping.
    """

    def __init__(self, *, backend: httpcore.NetworkBackend, limits: httpx.Limits) -> None:
        # trust_env=False: SSL_CERT_FILE & co. from the environment do not change verification.
        ssl_context = httpx.create_ssl_context(verify=True, trust_env=False)
        super().__init__(verify=ssl_context, trust_env=False, limits=limits)
        self._pool.close()
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            http1=True,
            http2=False,
            network_backend=backend,
        )


def _refusing_cookie_jar() -> http.cookiejar.CookieJar:
    # One client serves every customer: never store a Set-Cookie from one delivery and replay it.
    return http.cookiejar.CookieJar(policy=http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))


def _flatten_headers(headers: httpx.Headers) -> dict[str, str]:
    flat: dict[str, str] = {}
    for name, value in headers.multi_items():
        name = name.lower()
        flat[name] = f"{flat[name]}, {value}" if name in flat else value
    return flat


def _classify(exc: Exception) -> tuple[str, str] | None:
    """``(error_class, message)`` for a network problem, or None for anything else (a bug: re-raised)."""
    name = type(exc).__name__
    detail = str(exc)
    if isinstance(exc, UnresolvableHost):
        return "dns", detail
    if isinstance(exc, BlockedAddress):
        return "blocked_address", detail
    if isinstance(exc, (TLSFailure, ssl.SSLError)):
        return "tls", f"TLS error: {detail}"
    if isinstance(exc, httpx.PoolTimeout):
        return "pool_timeout", "no free connection in the pool"
    if isinstance(exc, httpx.TimeoutException):
        return "timeout", f"{name}: {detail or 'timed out'}"
    if isinstance(exc, httpx.LocalProtocolError):
        # h11 quotes the offending header value, which may be a signature or secret: withhold it.
        return "protocol", f"{name}: invalid request (details withheld)"
    if isinstance(exc, (httpx.ProtocolError, httpx.UnsupportedProtocol, httpx.DecodingError)):
        return "protocol", f"{name}: {detail}"
    if isinstance(exc, httpx.InvalidURL):
        return "protocol", f"invalid URL: {detail}"
    if isinstance(exc, socket.gaierror):
        return "dns", f"{name}: {detail}"
    if isinstance(exc, (httpx.TransportError, OSError)):
        return "connection", f"{name}: {detail}"
    if isinstance(exc, httpx.HTTPError):
        return "protocol", f"{name}: {detail}"
    return None


class Sender:
    """Posts webhook payloads. Thread-safe: share one Sender between all delivery threads."""

    def __init__(
        self,
        *,
        timeout: float,
        policy: TargetPolicy,
        max_connections: int = 32,
        max_body: int = 20 * 1024,
        resolver: Resolver | None = None,
        user_agent: str = "webhooks/1.0",
    ) -> None:
        self._timeout = timeout
        self._max_body = max_body
        limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._client = httpx.Client(
            transport=GuardedTransport(backend=GuardedBackend(policy, resolver), limits=limits),
            # Per phase (connect, read, write, pool wait); the _Budget adds the total deadline.
            timeout=httpx.Timeout(timeout),
            follow_redirects=False,  # a 3xx is the endpoint's answer: never deliver to a URL nobody registered
            trust_env=False,  # HTTP(S)_PROXY, .netrc etc. must not reroute or alter deliveries
            # identity: the stored body is readable and no decompression bomb can be sent back.
            headers={"User-Agent": user_agent, "Accept-Encoding": "identity"},
            cookies=_refusing_cookie_jar(),
        )

    def post(self, url: str, headers: Mapping[str, str], body: bytes) -> HttpResult:
        """POST ``body`` to ``url``; network problems come back as an HttpResult, never raised."""
        started = time.monotonic()
        budget = _Budget(self._timeout)
        token = _budget.set(budget)
        status: int | None = None
        response_headers: dict[str, str] = {}
        received = bytearray()
        error: tuple[str, str] | None = None
        try:
            with self._client.stream("POST", url, headers=dict(headers), content=body) as response:
                status = response.status_code
                response_headers = _flatten_headers(response.headers)
                for chunk in response.iter_raw():
                    received += chunk
                    if len(received) >= self._max_body:
                        break  # leaving the block closes the connection instead of draining it
        except Exception as exc:
            error = _classify(exc)
            if error is None:
                raise
            if error[0] == "timeout" and budget.exhausted():
                # The socket timeout that fired was the clamped remainder: name the real cause.
                error = ("timeout", f"total deadline of {self._timeout:g} s exceeded ({type(exc).__name__})")
        finally:
            _budget.reset(token)
        return HttpResult(
            status_code=status,
            headers=response_headers,
            body=bytes(received[: self._max_body]),
            duration_ms=(time.monotonic() - started) * 1000.0,
            error_class=None if error is None else error[0],
            error=None if error is None else error[1][:MAX_ERROR_CHARS],
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Sender:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
