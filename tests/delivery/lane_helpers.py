"""Messages and lanes for the unit tests of ``lanes`` and ``spill``: no broker, no database."""

from __future__ import annotations

from typing import Any

from webhooks.delivery.lanes import Lanes
from webhooks.delivery.receipt import Receipt
from webhooks.delivery.window import Signal
from webhooks.messaging.messages import DeliveryMessage


def message(tenant: str, endpoint: str, n: int, trigger: str = "ladder") -> DeliveryMessage:
    return DeliveryMessage(f"dlv_{endpoint}_{n}", f"evt_{n}", endpoint, tenant, "order.created",
                           "2026-11-23T10:00:00.000Z", {"n": n}, trigger=trigger)


def queue(lanes: Lanes, tenant: str, endpoint: str, count: int = 1, start: int = 0) -> None:
    """``count`` messages of ``tenant`` for ``endpoint`` (numbered from ``start``) into their lane."""
    for n in range(start, start + count):
        lanes.add(message(tenant, endpoint, n), receipt=None, now=0.0)


class Broker:
    """A stand-in for a broker session: it records the tags acked and requeued."""

    is_open = True

    def __init__(self) -> None:
        self.acked: list[int] = []
        self.requeued: list[int] = []

    def ack(self, tag: int) -> None:
        self.acked.append(tag)

    def requeue(self, tag: int) -> None:
        self.requeued.append(tag)

    async def publish(self, queue: str, body: bytes, headers: dict[str, Any], timeout: float) -> bool:
        return True


def measured_lane(lanes: Lanes, tenant: str, endpoint: str, count: int, answers_in: float, start_tag: int = 0,
                  broker: Broker | None = None) -> None:
    """``count`` messages (from ``broker``) for an endpoint whose one answer so far took ``answers_in`` seconds."""
    window = lanes.lane(endpoint, tenant).window
    window.started()
    window.finished(Signal.ANSWERED, sent_at=0.0, now=answers_in)
    broker = broker or Broker()
    for n in range(count):
        lanes.add(message(tenant, endpoint, n), Receipt(broker, start_tag + n), now=0.0)


def quick_lane(lanes: Lanes, tenant: str, endpoint: str, count: int, start_tag: int = 0) -> None:
    measured_lane(lanes, tenant, endpoint, count, 0.005, start_tag)


def open_windows(lanes: Lanes) -> None:
    """Every lane's window at its ceiling (tests of the budgets and shares, which windows would hide)."""
    for lane in lanes:
        lane.window.limit = float(lane.window.ceiling)


def slow_lane(lanes: Lanes, tenant: str, endpoint: str, count: int, start_tag: int = 0,
              broker: Broker | None = None) -> None:
    measured_lane(lanes, tenant, endpoint, count, 5.0, start_tag, broker)
