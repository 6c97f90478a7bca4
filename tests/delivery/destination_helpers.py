"""What the tests of each kind of destination share: a signed parcel, a free port, one destination's deliveries."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

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
