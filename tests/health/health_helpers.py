"""Endpoints that are down, their deliveries' statuses and a publisher that records, for the health tests."""

from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace
from typing import Iterator, Sequence

from tests.api_helpers import create_endpoint, send
from tests.conftest import wait_until
from tests.receivers import Receiver, RecordedRequest
from webhooks.messaging.messages import DeliveryMessage
from webhooks.messaging.publisher import Outgoing
from webhooks.storage.models import Delivery, Endpoint


class RecordingPublisher:
    """Stands in for the broker: confirms everything and remembers it, in order."""

    def __init__(self) -> None:
        self.messages: list[DeliveryMessage] = []

    def publish(self, messages: Sequence[Outgoing]) -> int:
        self.messages.extend(DeliveryMessage.decode(body, headers) for _, body, headers in messages)
        return len(messages)

    def close(self) -> None:
        pass


def health(endpoint_id: str) -> str:
    endpoint = Endpoint.get_by_id(endpoint_id)
    return "disabled" if endpoint.disabled else endpoint.health


def statuses(endpoint_id: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for delivery in Delivery.select().where(Delivery.endpoint == endpoint_id):
        counts[delivery.status] = counts.get(delivery.status, 0) + 1
    return counts


class Switch:
    """A receiver's responder: down (503) until switched up (204)."""

    def __init__(self) -> None:
        self.up = False

    def __call__(self, request: RecordedRequest):
        return (204, None, b"") if self.up else (503, None, b"down")


def take_offline(client, headers, url: str, count: int, parked: int) -> tuple[dict, list[str]]:
    """Register ``url`` (down), send ``count`` events and wait until the endpoint is offline with
    at least ``parked`` of them parked; (the endpoint, event ids oldest first)."""
    endpoint = create_endpoint(client, headers, url)
    events = [send(client, headers, payload={"n": n})["id"] for n in range(count)]
    wait_until(lambda: health(endpoint["id"]) == "offline", timeout=15)
    wait_until(lambda: statuses(endpoint["id"]).get("parked", 0) >= parked, timeout=15)
    return endpoint, events


@contextmanager
def outage(client, headers, settings, start_worker, start_clock, count: int, parked: int) -> Iterator[SimpleNamespace]:
    """A receiver that is down (``switch.up = True`` brings it back), a worker and a clock running, and an
    endpoint of it taken offline with ``count`` events (``take_offline``): its ``switch``, ``receiver``,
    ``endpoint`` and ``events``."""
    switch = Switch()
    with Receiver(switch) as receiver:
        start_worker(settings)
        start_clock(settings)
        endpoint, events = take_offline(client, headers, receiver.url, count, parked)
        yield SimpleNamespace(switch=switch, receiver=receiver, endpoint=endpoint, events=events)
