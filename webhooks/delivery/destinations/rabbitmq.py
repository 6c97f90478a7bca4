"""The RabbitMQ kind: ``amqp://user:pass@host:port/vhost?exchange=X&routing_key=K`` (``amqps://``: TLS).

Each delivery is one message published to exchange ``X`` with routing key ``K``: persistent,
``mandatory``, on a channel in confirm mode, with the exact body bytes signed, the Standard
Webhooks headers (``webhook-id``, ``webhook-timestamp``, ``webhook-signature``) as AMQP
headers, ``message_id`` the event id, ``type`` the event type and ``content_type``
``application/json``. The broker's confirm is the delivery; a ``basic.nack`` (``nack``), a
return (``unroutable``: no queue is bound for the routing key), a refused login or
permission (``auth``), a missing exchange (``refused``), a connection that fails or breaks
(``connection``), a TLS handshake that fails (``tls``: a certificate that does not verify) and the
deadline (``timeout``) are failures the ladder retries.

One connection and channel per destination URL (pika's ``AsyncioConnection``), reused by
every delivery to it and closed once it has been idle for ``kept.IDLE_SECONDS``; a broken
one is replaced on the next delivery. Each connection goes to an address the SSRF policy
checked (``guard.GuardedResolver``); TLS still checks the certificate against the host name, trusting
certifi's CAs only (``sender.tls_context``, built at the first ``amqps://`` delivery and shared by every link).
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pika
import pika.channel
import pika.exceptions
import pika.frame
import pika.spec
from pika.adapters.asyncio_connection import AsyncioConnection
from yarl import URL

from webhooks.delivery.destinations.base import (
    NAME_CHARS, USERINFO_CHARS, Kind, Parcel, failure, one_line, query_of, scheme_of,
)
from webhooks.delivery.destinations.kept import Kept
from webhooks.delivery.broker import confirmed_tags
from webhooks.delivery.sender import tls_context
from webhooks.delivery.guard import GuardedResolver
from webhooks.delivery.http_result import HttpResult
from webhooks.delivery.netguard import (
    HOST_AND_PORT_PATTERN, BlockedAddress, Resolver, TargetPolicy, UnresolvableHost, resolve, split_url,
)
from webhooks.messaging.brokers import split_urls

DEFAULT_PORTS = {"amqp": 5672, "amqps": 5671}
#: The query parameters an AMQP URL may carry.
PARAMETERS = ("exchange", "routing_key")
#: A confirmed publish's response, as the attempt log shows it.
CONFIRMED = b"confirmed by the broker"
#: Heartbeats keep an idle connection's firewall state alive until it is closed (s).
HEARTBEAT_SECONDS = 30

#: The AMQP URLs the API accepts, exactly (``AmqpTarget.parse`` reads every one of them:
#: tests/delivery/test_rabbitmq_destination.py checks it with generated strings): a user and
#: password, the host and port, an optional vhost (percent-encoded), ``exchange=`` and an
#: optional ``routing_key=``.
PATTERN = (
    rf"^[Aa][Mm][Qq][Pp][Ss]?://{USERINFO_CHARS}+:{USERINFO_CHARS}*@{HOST_AND_PORT_PATTERN}"
    rf"(?:/{USERINFO_CHARS}*)?\?exchange={NAME_CHARS}{{0,255}}(?:&routing_key={NAME_CHARS}{{0,255}})?$(?!\n)"
)

#: ``(error_class, message)`` of a publish that failed; None when it was confirmed.
Failure = tuple[str, str] | None


@dataclass(frozen=True)
class AmqpTarget:
    """An AMQP URL, read."""

    scheme: str
    host: str
    port: int
    vhost: str
    username: str
    password: str
    exchange: str
    routing_key: str

    @classmethod
    def parse(cls, url: str) -> AmqpTarget:
        """The URL read, or ValueError naming what is wrong with it."""
        scheme, host, port = split_url(url, DEFAULT_PORTS)
        parsed = URL(url)
        if not parsed.user or parsed.password is None:
            raise ValueError("an AMQP URL names its user and password: amqp://user:password@host/vhost")
        query = query_of(parsed, PARAMETERS, "an AMQP")
        if "exchange" not in query:
            raise ValueError("an AMQP URL names its exchange: ?exchange=NAME&routing_key=KEY (exchange= for the default)")
        raw_vhost = parsed.raw_path[1:] if parsed.raw_path.startswith("/") else parsed.raw_path
        return cls(scheme, host, port, unquote(raw_vhost) or "/", parsed.user, parsed.password,
                   query["exchange"], query.get("routing_key", ""))

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}, vhost {self.vhost!r}"


def own_broker_problem(url: str, amqp_url: str, resolver: Resolver | None = None) -> str | None:
    """Why ``url`` may not be a destination because it is this service's own broker vhost (any node
    of ``AMQP_URL``: the same vhost on a host that resolves to one of the same addresses and port), or None."""
    if scheme_of(url) not in DEFAULT_PORTS:
        return None
    target = AmqpTarget.parse(url)
    for node in split_urls(amqp_url):
        own = URL(node)
        own_vhost = unquote(own.raw_path[1:]) or "/"
        own_port = own.port or DEFAULT_PORTS.get(own.scheme, 5672)
        if own_vhost != target.vhost or own_port != target.port or not own.raw_host:
            continue
        try:
            same = set(resolve(target.host, target.port, resolver)) & set(resolve(own.raw_host, own_port, resolver))
        except UnresolvableHost:
            continue
        if same:
            return f"{target.host}:{target.port}, vhost {target.vhost!r} is this service's own broker: use a broker or vhost of your own"
    return None


def split(url: str) -> tuple[str, str, int]:
    target = AmqpTarget.parse(url)
    return target.scheme, target.host, target.port


KIND = Kind(name="RabbitMQ", schemes=("amqp", "amqps"), pattern=PATTERN, split=split)


def message_properties(parcel: Parcel) -> pika.BasicProperties:
    """Persistent, with the Standard Webhooks headers; ``message_id`` is the event id."""
    headers = parcel.request.headers
    return pika.BasicProperties(
        delivery_mode=pika.DeliveryMode.Persistent,
        content_type=headers.get("content-type", "application/json"),
        message_id=parcel.event_id,
        type=parcel.event_type,
        timestamp=int(headers["webhook-timestamp"]),
        headers={name: headers[name] for name in ("webhook-id", "webhook-timestamp", "webhook-signature")},
    )


class _Link:
    """One connection and confirming channel to one destination (``tls``: the context of an ``amqps://`` one)."""

    def __init__(self, target: AmqpTarget, guard: GuardedResolver, tls: ssl.SSLContext | None = None) -> None:
        self.target = target
        self._guard = guard
        self._tls = tls
        self.loop = asyncio.get_running_loop()
        self.connection: AsyncioConnection | None = None
        self.channel: pika.channel.Channel | None = None
        self.ready: asyncio.Future[Failure] | None = None
        self.broken: Failure = None
        self._published = 0
        self._confirms: dict[int, asyncio.Future[Failure]] = {}
        #: Each unconfirmed publish's identity (``_identity``), to match a return to it.
        self._identities: dict[int, tuple[Any, ...]] = {}
        #: Returns received, by tag: the confirm that follows fails them as unroutable.
        self._returned: dict[int, str] = {}
        self._opening: asyncio.Task[None] | None = None

    @property
    def usable(self) -> bool:
        return self.broken is None and (self.ready is None or not self.ready.done() or self.ready.result() is None)

    async def open(self) -> Failure:
        """Connect once (later callers wait for the same opening); the failure, if it failed."""
        if self.ready is None:
            self.ready = self.loop.create_future()
            self._opening = self.loop.create_task(self._open())
        return await asyncio.shield(self.ready)

    async def _open(self) -> None:
        assert self.ready is not None
        target = self.target
        try:
            records = await self._guard.resolve(target.host, target.port)
        except UnresolvableHost as error:
            self._fail(("dns", str(error)))
            return
        except BlockedAddress as error:
            self._fail(("blocked_address", str(error)))
            return
        if not records:
            self._fail(("dns", f"{target.host} has no address of a usable family"))
            return
        if self.broken is not None:  # closed while the name was looked up: connect nowhere
            return
        ssl_options = None
        if self._tls is not None:  # the certificate is checked against the name, not the address connected to
            ssl_options = pika.SSLOptions(self._tls, server_hostname=target.host)
        parameters = pika.ConnectionParameters(
            host=records[0]["host"], port=target.port, virtual_host=target.vhost,
            credentials=pika.PlainCredentials(target.username, target.password, erase_on_connect=False),
            ssl_options=ssl_options, connection_attempts=1, heartbeat=HEARTBEAT_SECONDS,
            client_properties={"connection_name": "webhooks destination"},
        )
        self.connection = AsyncioConnection(
            parameters, on_open_callback=self._on_open, on_open_error_callback=self._on_open_error,
            on_close_callback=self._on_closed, custom_ioloop=self.loop,
        )

    def _on_open(self, connection: AsyncioConnection) -> None:
        connection.channel(on_open_callback=self._on_channel)

    def _on_channel(self, channel: pika.channel.Channel) -> None:
        self.channel = channel
        channel.add_on_close_callback(self._on_channel_closed)
        channel.add_on_return_callback(self._on_return)
        channel.confirm_delivery(self._on_confirm, callback=lambda _frame: self._opened())

    def _opened(self) -> None:
        if self.ready is not None and not self.ready.done():
            self.ready.set_result(None)

    def _on_open_error(self, _connection: Any, error: BaseException) -> None:
        self._fail(_connect_failure(error, self.target))

    def _on_closed(self, _connection: Any, reason: BaseException) -> None:
        self._fail(self.broken or ("connection", f"the connection to {self.target.where} closed: {reason}"))

    def _on_channel_closed(self, _channel: Any, reason: BaseException) -> None:
        self._fail(_channel_failure(reason, self.target))
        if self.connection is not None and self.connection.is_open:
            self.connection.close()

    def _fail(self, failed: Failure) -> None:
        """The link is broken: everything waiting on it fails with ``failed``."""
        self.broken = self.broken or failed
        if self.ready is not None and not self.ready.done():
            self.ready.set_result(self.broken)
        for future in self._confirms.values():
            if not future.done():
                future.set_result(self.broken)
        self._confirms.clear()

    async def publish(self, parcel: Parcel) -> Failure:
        """Publish ``parcel``; None once the broker confirmed it, else the failure."""
        opened = await self.open()
        if opened is not None:
            return opened
        if self.broken is not None or self.channel is None:
            return self.broken or ("connection", f"no channel to {self.target.where}")
        self._published += 1
        tag = self._published
        confirmed: asyncio.Future[Failure] = self.loop.create_future()
        self._confirms[tag] = confirmed
        properties = message_properties(parcel)
        self._identities[tag] = _identity(properties)
        try:
            self.channel.basic_publish(self.target.exchange, self.target.routing_key, parcel.request.body,
                                       properties, mandatory=True)
        except (pika.exceptions.AMQPError, OSError) as error:
            self._confirms.pop(tag, None)
            self._identities.pop(tag, None)
            self._fail(("connection", f"cannot publish to {self.target.where}: {error!r}"))
            return self.broken
        try:
            return await confirmed
        finally:
            self._confirms.pop(tag, None)
            self._identities.pop(tag, None)
            self._returned.pop(tag, None)

    def _on_return(self, _channel: Any, method: pika.spec.Basic.Return, properties: pika.BasicProperties,
                   _body: bytes) -> None:
        # A return comes before the confirm of the same message, which it is matched to by its
        # identity (the message id is the event's, so it cannot be a tag of ours).
        identity = _identity(properties)
        for tag, published in self._identities.items():
            if published == identity and tag not in self._returned:
                self._returned[tag] = f"{method.reply_code} {method.reply_text}"
                return

    def _on_confirm(self, frame: pika.frame.Method) -> None:
        acked, tags = confirmed_tags(frame, list(self._confirms))
        for tag in tags:
            future = self._confirms.pop(tag, None)
            returned = self._returned.pop(tag, None)
            if future is None or future.done():
                continue
            if not acked:
                future.set_result(("nack", f"{self.target.where} refused the message (basic.nack)"))
            elif returned is not None:
                future.set_result(("unroutable", f"exchange {self.target.exchange!r} at {self.target.where} routed "
                                                 f"routing key {self.target.routing_key!r} to no queue ({returned})"))
            else:
                future.set_result(None)

    async def close(self, reason: tuple[str, str] = ("connection", "the connection was closed")) -> None:
        """Fail whatever still waits on the link with ``reason`` and close its connection."""
        self._fail(reason)
        if self.connection is not None and not (self.connection.is_closed or self.connection.is_closing):
            try:
                self.connection.close()
            except pika.exceptions.ConnectionWrongStateError:
                pass


class RabbitMQ:
    """Publishes each parcel to the exchange its URL names; one connection per destination URL."""

    kind = KIND

    def __init__(self, *, timeout: float, policy: TargetPolicy, resolver: Resolver | None = None) -> None:
        self._timeout = timeout
        self._guard = GuardedResolver(policy, resolver)
        self._links: Kept[_Link] = Kept()

    async def deliver(self, url: str, parcel: Parcel) -> HttpResult:
        started = time.monotonic()
        for idle in self._links.idle():
            await idle.close()
        try:
            target = _target(url)
        except ValueError as error:
            return failure("protocol", f"invalid URL: {error}")
        tls = self._tls_context if target.scheme == "amqps" else None
        with self._links.use(url, lambda: _Link(target, self._guard, tls), lambda link: link.usable) as link:
            try:
                async with asyncio.timeout(self._timeout):
                    failed = await link.publish(parcel)
            except TimeoutError:
                failed = ("timeout", f"total deadline of {self._timeout:g} s exceeded publishing to {target.where}")
                await link.close(failed)  # a broker that does not confirm in time is not trusted with the next one
        duration_ms = (time.monotonic() - started) * 1000.0
        if failed is not None:
            if not link.usable:
                self._links.forget(url, link)
            return failure(failed[0], one_line(failed[1]), duration_ms)
        return HttpResult(status_code=None, headers={}, body=CONFIRMED, duration_ms=duration_ms, error_class=None, error=None)

    async def close(self) -> None:
        for link in self._links.all():
            await link.close()

    @functools.cached_property
    def _tls_context(self) -> ssl.SSLContext:
        return tls_context()


#: ``AmqpTarget.parse``, once per URL (it is read for every delivery).
_target = functools.lru_cache(maxsize=1024)(AmqpTarget.parse)


def _identity(properties: pika.BasicProperties) -> tuple[Any, ...]:
    """What tells one publish from another when the broker returns it: the event id, and the
    signed timestamp and signature (one attempt's)."""
    headers = properties.headers or {}
    return properties.message_id, str(headers.get("webhook-timestamp")), str(headers.get("webhook-signature"))


def _connect_failure(error: BaseException, target: AmqpTarget) -> tuple[str, str]:
    tls = _tls_error(error)
    if tls is not None:
        return "tls", f"TLS error with {target.where}: {tls}"
    if isinstance(error, (pika.exceptions.ProbableAuthenticationError, pika.exceptions.AuthenticationError)):
        return "auth", f"{target.where} refused the login of user {target.username!r}"
    if isinstance(error, pika.exceptions.ProbableAccessDeniedError):
        return "auth", f"{target.where}: user {target.username!r} may not use the vhost"
    return "connection", f"cannot connect to {target.where}: {error!r}"


def _tls_error(error: BaseException) -> ssl.SSLError | None:
    """The TLS error a failed connection workflow wraps (``AMQPConnectionWorkflowFailed``, each attempt's
    phase error), if it is one."""
    for attempt in getattr(error, "exceptions", None) or [error]:
        cause = getattr(attempt, "exception", attempt)
        if isinstance(cause, ssl.SSLError):
            return cause
    return None


def _channel_failure(reason: BaseException, target: AmqpTarget) -> tuple[str, str]:
    if isinstance(reason, pika.exceptions.ChannelClosedByBroker):
        if reason.reply_code == 403:
            return "auth", f"{target.where} refused: {reason.reply_text}"
        if reason.reply_code == 404:
            return "refused", f"{target.where} has no such exchange: {reason.reply_text}"
        return "refused", f"{target.where} closed the channel: {reason.reply_code} {reason.reply_text}"
    return "connection", f"the channel to {target.where} closed: {reason!r}"
