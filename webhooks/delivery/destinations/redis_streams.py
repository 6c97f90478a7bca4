"""The Redis-stream kind: ``redis://[user:pass@]host:port/db?stream=NAME[&maxlen=N]`` (``rediss://``: TLS).

Each delivery is one ``XADD`` to the stream with the fields ``id`` (the event id, as
``webhook-id``), ``type``, ``timestamp`` (``webhook-timestamp``), ``signature``
(``webhook-signature``) and ``body`` (the exact bytes signed); ``maxlen`` trims the stream
to about that many entries (``MAXLEN ~``). The entry id Redis answers is the attempt's
response. A reader verifies an entry as it would an HTTP request, with ``id``, ``timestamp``
and ``signature`` as the three headers.

Connections (redis-py's asyncio ``Connection``) are pooled per destination URL, at most ``POOL_SIZE`` of them
(``_Pool``): a delivery beyond that waits for a free one (within its deadline) rather than failing. Each ``XADD`` is
written in the Redis protocol here (``xadd_command``) and sent on a pooled connection: half the worker's CPU per
delivery that redis-py's client and pool took. Connections are closed once the destination has been idle for
``kept.IDLE_SECONDS``. Every new connection resolves its host and connects to an address the SSRF policy checked
(``guard.GuardedResolver``), as HTTP's do; TLS still checks the certificate against the host name, trusting
certifi's CAs only (``sender.tls_context``, built at the first ``rediss://`` delivery and shared by every
connection: redis-py's own context trusted the system's store and SSL_CERT_FILE too, and read the CA files again
for every new connection, some 70 ms on the event loop each).
redis-py retries nothing: a failure is the ladder's to retry.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from redis.asyncio.connection import Connection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError, AuthorizationError, NoPermissionError, RedisError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from yarl import URL

from webhooks.delivery.destinations.base import (
    NAME_CHARS, USERINFO_CHARS, Kind, Parcel, failure, one_line, query_of,
)
from webhooks.delivery.destinations.kept import Kept
from webhooks.delivery.guard import GuardedResolver
from webhooks.delivery.http_result import HttpResult
from webhooks.delivery.sender import os_reason, tls_context
from webhooks.delivery.netguard import HOST_AND_PORT_PATTERN, BlockedAddress, Resolver, TargetPolicy, UnresolvableHost, split_url

#: Redis's port when the URL names none.
DEFAULT_PORTS = {"redis": 6379, "rediss": 6379}
#: The longest stream name accepted.
MAX_STREAM_CHARS = 256
#: The query parameters a Redis URL may carry.
PARAMETERS = ("stream", "maxlen")

#: The Redis URLs the API accepts, exactly (``RedisTarget.parse`` reads every one of them:
#: tests/delivery/test_redis_streams.py checks it with generated strings): an optional user and
#: password, the host and port, an optional database number, ``stream=`` and an optional ``maxlen=``.
PATTERN = (
    rf"^[Rr][Ee][Dd][Ii][Ss][Ss]?://(?:{USERINFO_CHARS}*(?::{USERINFO_CHARS}*)?@)?{HOST_AND_PORT_PATTERN}"
    rf"(?:/[0-9]{{0,9}})?\?stream={NAME_CHARS}{{1,{MAX_STREAM_CHARS}}}(?:&maxlen=[1-9][0-9]{{0,17}})?$(?!\n)"
)


@dataclass(frozen=True)
class RedisTarget:
    """A Redis-stream URL, read."""

    scheme: str
    host: str
    port: int
    db: int
    username: str | None
    password: str | None
    stream: str
    maxlen: int | None

    @classmethod
    def parse(cls, url: str) -> RedisTarget:
        """The URL read, or ValueError naming what is wrong with it."""
        scheme, host, port = split_url(url, DEFAULT_PORTS)
        parsed = URL(url)
        path = parsed.path.strip("/")
        if path and not (path.isascii() and path.isdigit()):
            raise ValueError(f"the path of a Redis URL is the database number, not {parsed.path!r}")
        query = query_of(parsed, PARAMETERS, "a Redis")
        stream = query.get("stream", "")
        if not stream:
            raise ValueError("a Redis URL names its stream: ?stream=NAME")
        if len(stream) > MAX_STREAM_CHARS or not stream.isprintable():
            raise ValueError(f"the stream name must be 1 to {MAX_STREAM_CHARS} printable characters")
        maxlen = query.get("maxlen")
        if maxlen is not None and not (maxlen.isascii() and maxlen.isdigit() and int(maxlen) > 0):
            raise ValueError(f"maxlen= must be a positive whole number, not {maxlen!r}")
        return cls(scheme, host, port, int(path or 0), parsed.user or None, parsed.password,
                   stream, None if maxlen is None else int(maxlen))

    @property
    def tls(self) -> bool:
        return self.scheme == "rediss"


def split(url: str) -> tuple[str, str, int]:
    target = RedisTarget.parse(url)
    return target.scheme, target.host, target.port


KIND = Kind(name="Redis stream", schemes=("redis", "rediss"), pattern=PATTERN, split=split)


def entry_fields(parcel: Parcel) -> dict[str, str | bytes]:
    """The stream entry of one delivery: what an HTTP request would carry, as fields."""
    headers = parcel.request.headers
    return {
        "id": parcel.event_id,
        "type": parcel.event_type,
        "timestamp": headers["webhook-timestamp"],
        "signature": headers["webhook-signature"],
        "body": parcel.request.body,
    }


#: Connections at most per destination URL and worker process. An endpoint may have more calls in flight
#: (``ENDPOINT_MAX_IN_FLIGHT``); those wait for a connection.
POOL_SIZE = 64


class _Guarded:
    """Mixed into redis-py's connection: each connects to an address the SSRF policy checked, with TLS when ``tls``."""

    guard: GuardedResolver
    host: str
    port: int

    def __init__(self, *, tls: ssl.SSLContext | None = None, **kwargs: Any) -> None:
        #: The TLS context of a ``rediss://`` destination's connections; None for ``redis://``.
        self.tls = tls
        super().__init__(**kwargs)  # type: ignore[call-arg]

    async def _connect(self) -> None:
        records = await self.guard.resolve(self.host, self.port)
        if not records:
            raise UnresolvableHost(self.host, "no address of a usable family")
        self._address = records[0]["host"]
        await super()._connect()  # type: ignore[misc]

    def _connection_arguments(self) -> Mapping[str, Any]:
        arguments = dict(super()._connection_arguments())  # type: ignore[misc]
        if self.tls is not None:
            arguments["ssl"] = self.tls
            arguments["server_hostname"] = self.host  # the certificate is checked against the name
        arguments["host"] = self._address
        return arguments


class _Pool:
    """At most ``size`` connections to one destination: a delivery takes a free one, else a new one while there
    are fewer than ``size``, else waits for one to be given back (first come, first served).

    redis-py's own pools cost more than the ``XADD`` itself: a lock, a condition and awaited observability hooks
    for every command. A connection that fails is disconnected by redis-py and connects again when next used."""

    def __init__(self, make: Callable[[], Connection], size: int) -> None:
        self._make = make
        self._size = size
        self._all: list[Connection] = []
        self._free: list[Connection] = []
        self._waiting: deque[asyncio.Future[Connection]] = deque()

    async def take(self) -> Connection:
        if self._free:
            return self._free.pop()
        if len(self._all) < self._size:
            self._all.append(self._make())
            return self._all[-1]
        waiter: asyncio.Future[Connection] = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # handed over as the deadline struck: pass it on
                self.give(waiter.result())
            raise

    def give(self, connection: Connection) -> None:
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(connection)
                return
        self._free.append(connection)

    async def close(self) -> None:
        for connection in self._all:
            await connection.disconnect()


def xadd_command(target: RedisTarget, parcel: Parcel) -> bytes:
    """The ``XADD`` of one delivery in the Redis protocol (RESP): the stream, ``MAXLEN ~ N`` when the URL sets one,
    ``*`` (Redis numbers the entry) and the fields of ``entry_fields``."""
    parts: list[bytes] = [b"XADD", target.stream.encode()]
    if target.maxlen is not None:
        parts += [b"MAXLEN", b"~", b"%d" % target.maxlen]
    parts.append(b"*")
    for name, value in entry_fields(parcel).items():
        parts += [name.encode(), value if isinstance(value, bytes) else value.encode()]
    return b"".join([b"*%d\r\n" % len(parts), *(b"$%d\r\n%s\r\n" % (len(part), part) for part in parts)])


class RedisStreams:
    """Adds each parcel to the stream its URL names; one connection pool per destination URL."""

    kind = KIND

    def __init__(self, *, timeout: float, policy: TargetPolicy, resolver: Resolver | None = None) -> None:
        self._timeout = timeout
        guard = GuardedResolver(policy, resolver)
        self._connection = type("GuardedConnection", (_Guarded, Connection), {"guard": guard})
        self._pools: Kept[_Pool] = Kept()

    async def deliver(self, url: str, parcel: Parcel) -> HttpResult:
        started = time.monotonic()
        for idle in self._pools.idle():
            await idle.close()
        try:
            target = _target(url)
        except ValueError as error:
            return failure("protocol", f"invalid URL: {error}")
        try:
            with self._pools.use(url, lambda: self._pool(target)) as pool:
                async with asyncio.timeout(self._timeout):
                    connection = await pool.take()
                    try:
                        await connection.send_packed_command(xadd_command(target, parcel), check_health=False)
                        entry_id = await connection.read_response()
                    finally:
                        pool.give(connection)
        except Exception as exc:
            error = _describe(exc, target, self._timeout)
            if error is None:
                raise
            return failure(error[0], one_line(error[1]), (time.monotonic() - started) * 1000.0)
        return HttpResult(status_code=None, headers={}, body=bytes(entry_id), duration_ms=(time.monotonic() - started) * 1000.0,
                          error_class=None, error=None)

    async def close(self) -> None:
        for pool in self._pools.all():
            await pool.close()

    def _pool(self, target: RedisTarget) -> _Pool:
        tls = self._tls_context if target.tls else None
        return _Pool(lambda: self._connection(
            tls=tls, host=target.host, port=target.port, db=target.db, username=target.username,
            password=target.password, retry=Retry(NoBackoff(), 0), health_check_interval=0, client_name="webhooks",
            driver_info=None,  # no CLIENT SETINFO: one round trip less for every new connection
        ), POOL_SIZE)

    @functools.cached_property
    def _tls_context(self) -> ssl.SSLContext:
        return tls_context()


#: ``RedisTarget.parse``, once per URL (it is read for every delivery).
_target = functools.lru_cache(maxsize=1024)(RedisTarget.parse)


def _describe(exc: Exception, target: RedisTarget, timeout: float) -> tuple[str, str] | None:
    """``(error_class, message)`` for a problem of the destination, or None for anything else (a bug: re-raised).

    Messages name the host and the stream, never a password."""
    where = f"{target.host}:{target.port}"
    if isinstance(exc, (AuthenticationError, AuthorizationError, NoPermissionError)):
        return "auth", f"{where} refused the credentials or the command: {exc}"
    # redis-py wraps what went wrong while connecting in its ConnectionError.
    wrapped = (exc.__cause__ or exc.__context__) if isinstance(exc, RedisConnectionError) else None
    cause = wrapped if isinstance(wrapped, Exception) else exc
    if isinstance(cause, UnresolvableHost):
        return "dns", str(cause)
    if isinstance(cause, BlockedAddress):
        return "blocked_address", str(cause)
    if isinstance(cause, (TimeoutError, RedisTimeoutError)):
        return "timeout", f"total deadline of {timeout:g} s exceeded adding to stream {target.stream!r} at {where}"
    if isinstance(cause, ssl.SSLError):
        return "tls", f"TLS error with {where}: {cause}"
    if isinstance(cause, OSError):
        return "connection", f"cannot connect to {where}: {os_reason(cause)}"
    if isinstance(cause, RedisConnectionError):
        return "connection", f"cannot connect to {where}: {cause}"
    if isinstance(cause, ResponseError):
        return "refused", f"{where} refused XADD to stream {target.stream!r}: {cause}"
    if isinstance(cause, RedisError):
        return "connection", f"{type(cause).__name__} with {where}: {cause}"
    return None
