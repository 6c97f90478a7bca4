"""Outbound HTTP for webhook deliveries on the event loop: one aiohttp session, SSRF-checked at the socket.

``Sender.post`` never raises for a network problem: it returns an ``HttpResult`` with an
``error_class``. One session serves every endpoint and customer, so it keeps nothing between
calls but pooled connections: no cookies, no proxy from the environment, no redirects followed.
"""

from __future__ import annotations

import asyncio
import errno
import os
import ssl
import time
from collections.abc import Mapping
from types import TracebackType

import aiohttp
import certifi
from yarl import URL

from webhooks.delivery.guard import GuardedConnector, GuardedResolver
from webhooks.delivery.http_result import MAX_BODY_BYTES, MAX_ERROR_CHARS, HttpResult, kept_headers, without_nul
from webhooks.delivery.netguard import ALLOWED_SCHEMES, BlockedAddress, Resolver, TargetPolicy, UnresolvableHost
from webhooks.delivery.phases import phase_tracing
from webhooks.observability import tracing



def tls_context() -> ssl.SSLContext:
    """Whom every kind with TLS trusts (HTTPS here, ``amqps://``, ``rediss://``): certifi's bundle and nothing else
    (not the system's store, nor SSL_CERT_FILE & co. from the environment); the certificate is checked against the
    host name the connection gives (``server_hostname``). It reads the bundle from disk: build it once per use."""
    return ssl.create_default_context(cafile=certifi.where())


def _https_context() -> ssl.SSLContext:
    context = tls_context()
    context.set_alpn_protocols(["http/1.1"])
    return context


#: Built once at import (it reads the CA bundle from disk), never on the event loop.
_TLS_CONTEXT = _https_context()


class Sender:
    """Posts webhook payloads; construct it inside the running loop and share it between all deliveries.

    No connection limit of its own (the engine bounds concurrency per endpoint); idle connections
    are kept alive and reused. Each ``post`` has one total deadline of ``timeout`` seconds covering
    DNS, connect, TLS, sending, the response headers and the body read. While tracing is on (when the
    Sender is made), each result says how long its DNS lookup and connection took (``phases``).
    """

    def __init__(
        self,
        *,
        timeout: float,
        policy: TargetPolicy,
        max_body: int = MAX_BODY_BYTES,
        resolver: Resolver | None = None,
    ) -> None:
        self._timeout = timeout
        self._max_body = max_body
        self._timed = tracing.on()
        connector = GuardedConnector(
            resolver=GuardedResolver(policy, resolver),
            limit=0,
            limit_per_host=0,
            ssl=_TLS_CONTEXT,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            # No aiohttp timers (they are per phase, and rounded up past 5 s): post() keeps one deadline.
            timeout=aiohttp.ClientTimeout(),
            # identity: the stored body is readable and no decompression bomb can be sent back.
            # (The User-Agent is the request's: ``outgoing.build_request`` names it, and the attempt records it.)
            headers={"Accept-Encoding": "identity"},
            # The payload is the caller's bytes: no guessed Content-Type when the caller gives none.
            skip_auto_headers=("Content-Type",),
            auto_decompress=False,
            # One session serves every customer: never store a Set-Cookie from one delivery and replay it.
            cookie_jar=aiohttp.DummyCookieJar(),
            trust_env=False,  # HTTP(S)_PROXY, .netrc etc. must not reroute or alter deliveries
            trace_configs=[phase_tracing()] if self._timed else None,
        )

    async def post(self, url: str, headers: Mapping[str, str], body: bytes) -> HttpResult:
        """POST ``body`` to ``url``; network problems come back as an HttpResult, never raised."""
        started = time.monotonic()
        status: int | None = None
        response_headers: dict[str, str] = {}
        received = bytearray()
        error: tuple[str, str] | None = None
        phases: dict[str, float] | None = {} if self._timed else None
        try:
            target = _webhook_url(url)
            async with asyncio.timeout(self._timeout):
                # allow_redirects=False: a 3xx is the endpoint's answer; never deliver to a URL nobody registered.
                response = await self._session.post(target, headers=headers, data=body, allow_redirects=False,
                                                    trace_request_ctx=phases)
                status = response.status
                response_headers = kept_headers(response.headers.items())
                complete = False
                try:
                    complete = await _read_at_most(response.content, self._max_body, received)
                finally:
                    if complete:
                        response.release()  # back to the pool for the next delivery
                    else:
                        response.close()  # truncated or failed: drop the connection rather than drain it
        except Exception as exc:
            error = _describe(exc, self._timeout, body_started=status is not None)
            if error is None:
                raise
        return HttpResult(
            status_code=status,
            headers=response_headers,
            body=bytes(received),
            duration_ms=(time.monotonic() - started) * 1000.0,
            error_class=None if error is None else error[0],
            error=None if error is None else " ".join(without_nul(error[1]).split())[:MAX_ERROR_CHARS],  # one line
            phases=phases or None,
        )

    async def close(self) -> None:
        """Close every pooled connection; the Sender cannot be used afterwards."""
        await self._session.close()

    async def __aenter__(self) -> Sender:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


def _webhook_url(url: str) -> URL:
    """``url`` parsed, or aiohttp.InvalidURL when it cannot be a webhook target."""
    try:
        target = URL(url)
    except (ValueError, TypeError) as exc:
        raise aiohttp.InvalidURL(url, str(exc)) from exc
    if target.scheme not in ALLOWED_SCHEMES:
        raise aiohttp.InvalidURL(url, f"scheme must be http or https, not {target.scheme or 'missing'!r}")
    if not target.raw_host:
        raise aiohttp.InvalidURL(url, "no host")
    return target


async def _read_at_most(content: aiohttp.StreamReader, limit: int, into: bytearray) -> bool:
    """Append up to ``limit`` bytes of the body to ``into``; True when the whole body was read."""
    while len(into) < limit:
        chunk = await content.read(limit - len(into))
        into += chunk
        if not chunk or content.at_eof():  # at_eof first: most bodies arrive whole, saving a read
            return True
    return content.at_eof()


def _describe(exc: Exception, timeout: float, *, body_started: bool) -> tuple[str, str] | None:
    """``(error_class, message)`` for a network problem, or None for anything else (a bug: re-raised).

    Messages name the host and what went wrong, never a request header (signatures live there).
    """
    if isinstance(exc, TimeoutError):  # asyncio.timeout's; aiohttp's own timers are off
        where = "while reading the response body" if body_started else "before the response headers arrived"
        return "timeout", f"total deadline of {timeout:g} s exceeded {where}"
    if isinstance(exc, UnresolvableHost):
        return "dns", str(exc)
    if isinstance(exc, BlockedAddress):
        return "blocked_address", str(exc)
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return "tls", f"TLS error: {exc.certificate_error}"
    if isinstance(exc, (aiohttp.ClientSSLError, ssl.SSLError)):
        return "tls", f"TLS error: {getattr(exc, 'os_error', exc)}"
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return "dns", f"{exc.host} does not resolve ({exc.os_error})"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "connection", f"cannot connect to {exc.host}:{exc.port}: {os_reason(exc.os_error)}"
    if isinstance(exc, aiohttp.InvalidURL):
        return "protocol", f"invalid URL: {exc}"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "protocol", "the server closed the connection without a complete response"
    if isinstance(exc, aiohttp.ClientResponseError):
        return "protocol", f"invalid HTTP response: {exc.message}"
    if isinstance(exc, aiohttp.ClientPayloadError):
        return "protocol", f"invalid response body: {exc}"
    if isinstance(exc, (aiohttp.ClientConnectionError, OSError)):
        return "connection", f"{type(exc).__name__}: {exc}"
    if isinstance(exc, ValueError):
        # aiohttp refuses e.g. a CR/LF in a header value; the value may be a signature: withheld.
        return "protocol", f"{type(exc).__name__}: invalid request (details withheld)"
    if isinstance(exc, aiohttp.ClientError):
        return "protocol", f"{type(exc).__name__}: {exc}"
    return None


def os_reason(error: OSError) -> str:
    """"Connection refused" rather than asyncio's "Connect call failed (...)"."""
    if error.errno is not None and error.errno in errno.errorcode:
        return os.strerror(error.errno)
    return str(error) or type(error).__name__
