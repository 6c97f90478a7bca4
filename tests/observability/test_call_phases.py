"""The DNS and connect times a call's attempt span reports: timed while tracing is on, only for the
phases the call went through (a pooled connection has neither), and not at all while it is off."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.receivers import Receiver
from webhooks.delivery.http_result import HttpResult
from webhooks.delivery.netguard import TargetPolicy
from webhooks.delivery.sender import Sender
from webhooks.observability import tracing


@pytest.fixture
def traced() -> Iterator[None]:
    tracing.configure("test", exporter=InMemorySpanExporter())
    yield
    tracing.shutdown()


def receiver_test(host: str, port: int) -> list[str]:
    """A DNS answering for ``receiver.test`` only (every other name does not resolve)."""
    if host != "receiver.test":
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    return ["127.0.0.1"]


def two_calls(url: str) -> tuple[HttpResult, HttpResult]:
    """Two posts in a row from one Sender: the second on the connection the first opened."""
    async def scenario() -> tuple[HttpResult, HttpResult]:
        async with Sender(timeout=10, policy=TargetPolicy(allow_private=True), resolver=receiver_test) as sender:
            first = await sender.post(url, {}, b"{}")
            return first, await sender.post(url, {}, b"{}")
    return asyncio.run(scenario())


def test_a_new_connection_reports_its_dns_and_connect_times_and_a_pooled_one_neither(traced: None) -> None:
    with Receiver() as receiver:
        first, second = two_calls(f"http://receiver.test:{receiver.port}/hook")
    assert first.ok and second.ok
    assert first.phases is not None and set(first.phases) == {"dns", "connect"}
    assert all(0 <= ms < first.duration_ms for ms in first.phases.values())
    assert second.phases is None  # kept alive: nothing resolved, nothing opened


def test_with_tracing_off_nothing_is_timed() -> None:
    assert not tracing.on()
    with Receiver() as receiver:
        first, _ = two_calls(f"http://receiver.test:{receiver.port}/hook")
    assert first.ok and first.phases is None
