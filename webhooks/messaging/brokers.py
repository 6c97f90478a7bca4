"""Where RabbitMQ is: ``AMQP_URL`` names one node or, comma-separated, every node of a cluster.

``broker_parameters`` turns the setting into one ``pika.URLParameters`` per node, in
the order given, each bounded by the same timeouts; ``connect`` opens a blocking
connection to the first node that answers (pika tries them in turn). Every process
reads the setting through here: the worker's consuming session, the web's and clock's
publisher, ``rabbit_setup.py``, ``/healthz``, ``/metrics`` and the console.

A comma inside a URL (in a password, say) must be percent-encoded (``%2C``), as any
reserved character in a URL's user information.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import pika
import pika.exceptions

from webhooks.errors import InvalidInput
from webhooks.secrecy import mask

#: URL schemes RabbitMQ answers on (``amqps`` is AMQP over TLS).
SCHEMES = ("amqp", "amqps")


class BrokerUrlError(InvalidInput):
    """``AMQP_URL`` is not a comma-separated list of ``amqp://`` or ``amqps://`` URLs."""


def split_urls(amqp_url: str) -> list[str]:
    """The node URLs of ``AMQP_URL`` in order, blanks around commas ignored; raises ``BrokerUrlError``."""
    entries = [entry.strip() for entry in amqp_url.split(",")]
    if entries == [""]:
        raise BrokerUrlError("AMQP_URL is empty: give amqp://user:password@host:5672/vhost, comma-separated for a cluster")
    for number, entry in enumerate(entries, 1):
        where = f"AMQP_URL entry {number} of {len(entries)}"
        if not entry:
            raise BrokerUrlError(f"{where} is empty (a stray comma?)")
        scheme = entry.split("://", 1)[0].lower() if "://" in entry else ""
        if scheme not in SCHEMES:
            raise BrokerUrlError(f"{where} ({mask(entry)!r}) is not an amqp:// or amqps:// URL")
    return entries


def _parameters(entry: str, where: str) -> pika.URLParameters:
    try:
        params = pika.URLParameters(entry)
        if not urlsplit(entry).hostname:
            raise ValueError("no host")
    except ValueError as error:
        raise BrokerUrlError(f"{where} ({mask(entry)!r}): {error}") from None
    return params


def broker_parameters(amqp_url: str, timeout: float) -> list[pika.URLParameters]:
    """One parameter set per node of ``AMQP_URL``, in the order given.

    Connecting to a node and each socket operation give up after about ``timeout``
    seconds (the TCP and AMQP handshake together after twice that), so a dead node
    costs little before the next is tried; a broker that blocks publishers (memory or
    disk alarm) counts as down after ``max(5 × timeout, 5)`` seconds. One attempt per
    node: the callers have their own retry (the publisher's cooldown, the relay, the
    worker's backoff). Raises ``BrokerUrlError`` naming the first bad entry, or when
    the entries name different virtual hosts (one cluster serves the same vhosts on
    every node; different ones would be different queues).
    """
    entries = split_urls(amqp_url)
    nodes = []
    for number, entry in enumerate(entries, 1):
        params = _parameters(entry, f"AMQP_URL entry {number} of {len(entries)}")
        params.socket_timeout = timeout
        params.stack_timeout = timeout * 2
        params.blocked_connection_timeout = max(timeout * 5, 5.0)
        params.connection_attempts = 1
        nodes.append(params)
    vhosts = list(dict.fromkeys(params.virtual_host for params in nodes))
    if len(vhosts) > 1:
        raise BrokerUrlError(
            f"AMQP_URL entries name different virtual hosts ({', '.join(map(repr, vhosts))}): "
            "list the nodes of one cluster, each with the same vhost"
        )
    return nodes


def describe(params: pika.connection.Parameters) -> str:
    """``host:port`` of a node, for logs (never the credentials)."""
    return f"{params.host}:{params.port}"


def connect(amqp_url: str, timeout: float) -> pika.BlockingConnection:
    """A blocking connection to the first node of ``AMQP_URL`` that answers, tried in order.

    Raises pika's ``AMQPConnectionError`` (from the last node tried) when none answers.
    """
    return pika.BlockingConnection(broker_parameters(amqp_url, timeout))


def explain(error: BaseException, amqp_url: str) -> str:
    """Why connecting to RabbitMQ failed, in one line naming where it was looked for and what to do."""
    try:
        where = ", ".join(describe(params) for params in broker_parameters(amqp_url, 1.0))
    except BrokerUrlError as bad:
        return str(bad)
    text = " ".join((str(error), *map(repr, error.args))).lower()  # pika's errors say what happened in their args
    if isinstance(error, pika.exceptions.ProbableAuthenticationError):
        cause, remedy = "the user name or password was refused", "check AMQP_URL's user and password"
    elif isinstance(error, pika.exceptions.ProbableAccessDeniedError):
        vhost = broker_parameters(amqp_url, 1.0)[0].virtual_host
        cause = f"the virtual host {vhost!r} does not exist or the user may not use it"
        remedy = f"create it (rabbitmqctl add_vhost {vhost}) or fix AMQP_URL's path"
    elif isinstance(error, socket.gaierror):
        cause, remedy = "the host name was not found", "fix AMQP_URL's host"
    elif "refused" in text:
        cause, remedy = "connection refused (nothing listens there)", "start RabbitMQ there, or point AMQP_URL at it"
    elif isinstance(error, TimeoutError) or "timed out" in text or "timeout" in text:
        cause, remedy = "no answer in time", "check that the host is reachable and RabbitMQ is running"
    else:
        cause, remedy = mask(f"{type(error).__name__}: {error}"), "check AMQP_URL"
    return f"cannot connect to RabbitMQ at {where} (AMQP_URL): {cause}; {remedy}"
