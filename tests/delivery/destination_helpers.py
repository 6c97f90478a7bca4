"""What the tests of each kind of destination share: a signed parcel, a free port, one destination's deliveries,
a RabbitMQ vhost of one's own (``bench/steps/destinations.py`` uses it too)."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pika

from webhooks.delivery.destinations import Destination, Parcel
from webhooks.delivery.netguard import TargetPolicy
from webhooks.delivery.outgoing import build_request

SECRET = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldY"


def parcel(event_id: str = "evt_1") -> Parcel:
    """An ``order.paid`` event signed with ``SECRET`` now (verifiable within the library's tolerance)."""
    request = build_request(event_id, "order.paid", "2026-11-26T00:00:00Z", {"n": 1}, [SECRET], int(time.time()))
    return Parcel(event_id, "order.paid", request)


def deliver(kind: type[Any], url: str, *parcels: Parcel,
            policy: TargetPolicy = TargetPolicy(allow_private=True)) -> list[Any]:
    """The results of delivering ``parcels`` one after the other through one new destination of ``kind``."""
    async def run() -> list[Any]:
        destination: Destination = kind(timeout=5, policy=policy)
        try:
            return [await destination.deliver(url, one) for one in parcels]
        finally:
            await destination.close()

    return asyncio.run(run())


def free_port() -> int:
    """A loopback port nothing listens on (a server that is down)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def rabbitmqctl(*args: str, check: bool = True) -> str:
    return subprocess.run(["rabbitmqctl", "-q", *args], check=check, capture_output=True, text=True, timeout=60).stdout


def delete_vhosts(prefix: str) -> None:
    """Delete every vhost whose name starts with ``prefix`` and the user of its name (``own_vhost``'s): what a
    process that ended inside ``own_vhost`` without running its ``finally`` (a signal's handler) left behind."""
    for name in rabbitmqctl("list_vhosts", "name", check=False).split():
        if name.startswith(prefix):
            rabbitmqctl("delete_user", name, check=False)
            rabbitmqctl("delete_vhost", name, check=False)


@contextmanager
def own_vhost(exchange: str, routing_key: str, prefix: str = "webhooks-test") -> Iterator[SimpleNamespace]:
    """A vhost and a user of its name, ``<prefix>-<12 hex digits>``, on the machine's broker (``rabbitmqctl``;
    both deleted afterwards), with ``exchange`` bound to the queue ``received`` by ``routing_key``: ``vhost``,
    ``user``, ``password``, ``connect()``."""
    name, password = f"{prefix}-{uuid.uuid4().hex[:12]}", uuid.uuid4().hex

    def connect() -> pika.BlockingConnection:
        return pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", 5672, name,
                                                                 pika.PlainCredentials(name, password)))

    rabbitmqctl("add_vhost", name)
    try:
        rabbitmqctl("add_user", name, password)
        rabbitmqctl("set_permissions", "-p", name, name, ".*", ".*", ".*")
        connection = connect()
        channel = connection.channel()
        channel.exchange_declare(exchange, "direct", durable=True)
        channel.queue_declare("received", durable=True)
        channel.queue_bind("received", exchange, routing_key)
        connection.close()
        yield SimpleNamespace(vhost=name, user=name, password=password, connect=connect)
    finally:
        rabbitmqctl("delete_user", name, check=False)
        rabbitmqctl("delete_vhost", name, check=False)
