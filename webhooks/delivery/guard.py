"""The SSRF guard at the socket for aiohttp: resolve once, check every address, connect only to checked ones.

``GuardedResolver`` is the aiohttp resolver: it looks a name up once (``netguard.resolve``, on a
thread) and hands aiohttp only addresses that ``TargetPolicy.check_ip`` let through, so the socket
connects to the very address that was checked (no second lookup to rebind) while aiohttp keeps the
URL's host name for the Host header and for TLS (SNI, certificate check). aiohttp never asks a
resolver about IP-literal hosts, so ``GuardedConnector`` checks those itself. The rules are
``netguard``'s, unchanged; this module only places them where every connection passes.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.client_proto import ResponseHandler
from aiohttp.client_reqrep import ClientRequest
from aiohttp.helpers import is_ip_address
from aiohttp.tracing import Trace

from webhooks.delivery.netguard import BlockedAddress, Resolver, TargetPolicy, resolve

#: DNS lookups running at once (one thread each); more wait their turn, within their attempt's
#: deadline. aiohttp already merges concurrent lookups of one host into one.
MAX_CONCURRENT_LOOKUPS = 64
#: Seconds a checked DNS answer is reused for new connections (aiohttp's cache; it is checked once,
#: when looked up, and an answer never changes under a connection already made).
DNS_CACHE_SECONDS = 10
#: ResolveResult flags meaning "already numeric": aiohttp then does no lookup of its own.
_NUMERIC_FLAGS = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV


def check_addresses(policy: TargetPolicy, host: str, addresses: Iterable[str]) -> None:
    """Raise BlockedAddress unless the policy allows every one of ``host``'s ``addresses``.

    Any bad answer blocks the host: a mix of public and internal answers is a rebinding smell.
    """
    for address in addresses:
        try:
            policy.check_ip(host, address)
        except ValueError:
            # Not an IP address at all (aiohttp treats any host with a ":" as a literal): never connect.
            raise BlockedAddress(host, address, "invalid") from None


class GuardedResolver(AbstractResolver):
    """Resolves a host name once and returns only addresses the policy allows (else BlockedAddress).

    ``resolver`` replaces the system lookup (tests simulate DNS and DNS rebinding with it); without
    one, ``socket.getaddrinfo`` answers. A name that does not resolve raises UnresolvableHost.
    """

    def __init__(self, policy: TargetPolicy, resolver: Resolver | None = None) -> None:
        self.policy = policy
        self._resolver = resolver
        self._lookups = asyncio.Semaphore(MAX_CONCURRENT_LOOKUPS)

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_UNSPEC
    ) -> list[ResolveResult]:
        async with self._lookups:
            addresses = await self._lookup(host, port)
        check_addresses(self.policy, host, addresses)
        return [
            ResolveResult(
                hostname=host,
                host=address,
                port=port,
                family=socket.AF_INET6 if ":" in address else socket.AF_INET,
                proto=socket.IPPROTO_TCP,
                flags=_NUMERIC_FLAGS,
            )
            for address in addresses
            if family == socket.AF_UNSPEC or family == (socket.AF_INET6 if ":" in address else socket.AF_INET)
        ]

    async def close(self) -> None:
        pass  # lookups still running finish on their own threads; nothing waits for them

    async def _lookup(self, host: str, port: int) -> list[str]:
        """``netguard.resolve`` on a daemon thread: getaddrinfo blocks and has no timeout of its own.

        A daemon thread (not the loop's executor) because a hung lookup must neither occupy a
        shared pool nor hold up interpreter exit: the caller stops waiting at its deadline (its
        task is cancelled) and the thread ends with the system resolver's own timeout.
        """
        if is_ip_address(host.strip("[]")):
            return resolve(host, port, self._resolver)  # an address is its own answer: no lookup, no thread
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[list[str]] = loop.create_future()

        def settle(outcome: list[str] | BaseException) -> None:
            if answer.done():  # the waiter gave up (deadline, shutdown)
                return
            if isinstance(outcome, BaseException):
                answer.set_exception(outcome)
            else:
                answer.set_result(outcome)

        def lookup() -> None:
            outcome: list[str] | BaseException
            try:
                outcome = resolve(host, port, self._resolver)
            except BaseException as exc:  # handed over to the waiting task
                outcome = exc
            try:
                loop.call_soon_threadsafe(settle, outcome)
            except RuntimeError:
                pass  # the loop closed while this lookup hung: nobody is waiting any more

        threading.Thread(target=lookup, name="webhooks-dns", daemon=True).start()
        return await answer


class GuardedConnector(aiohttp.TCPConnector):
    """A ``TCPConnector`` whose every connection goes to an address the policy checked, never via a proxy.

    Names are checked by its ``GuardedResolver``; IP-literal hosts, which aiohttp answers without
    asking the resolver (``TCPConnector._resolve_host``, aiohttp 3.14), are checked here.
    """

    def __init__(self, *, resolver: GuardedResolver, **kwargs: Any) -> None:
        super().__init__(resolver=resolver, ttl_dns_cache=DNS_CACHE_SECONDS, **kwargs)
        self._guard = resolver

    async def _resolve_host(
        self, host: str, port: int, traces: Sequence[Trace] | None = None
    ) -> list[ResolveResult]:
        records = await super()._resolve_host(host, port, traces)
        if is_ip_address(host):  # the very test aiohttp uses to skip the resolver
            check_addresses(self._guard.policy, host, [record["host"] for record in records])
        return records

    async def _create_connection(
        self, req: ClientRequest, traces: list[Trace], timeout: aiohttp.ClientTimeout
    ) -> ResponseHandler:
        if req.proxy is not None:
            # Through a proxy the target is resolved by the proxy, out of the guard's sight.
            raise aiohttp.ClientConnectionError("proxies are not used for webhook deliveries")
        return await super()._create_connection(req, traces, timeout)
