"""The engine under faults: its broker connection closed under it, its database connections killed."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import psycopg2
import pytest

from tests.conftest import settings_env, wait_until
from tests.receivers import Receiver, always, sleep_then
from tests.api_helpers import create_endpoint, send
from webhooks.delivery.sender import Sender
from webhooks.storage.models import Delivery


def close_broker_connection(local_port: int) -> None:
    """What a broker node restart or a network cut does to one client connection."""
    listing = subprocess.run(["rabbitmqctl", "-q", "list_connections", "pid", "peer_port", "--no-table-headers"],
                             capture_output=True, text=True, timeout=60, check=True).stdout
    (pid,) = [line.split("\t")[0] for line in listing.splitlines() if line.endswith(f"\t{local_port}")]
    subprocess.run(["rabbitmqctl", "close_connection", pid, "test: connection cut"], capture_output=True, timeout=60, check=True)


@pytest.mark.parametrize("which", ["connection", "bulk_connection", "publishing"])
def test_a_worker_whose_broker_connection_is_cut_reconnects_and_every_delivery_arrives_once(
    which: str, client: Any, tenant: Any, auth: Any, settings: Any, start_worker: Any
) -> None:
    with Receiver(sleep_then(0.3)) as receiver:
        create_endpoint(client, auth(tenant), receiver.url)
        events = [send(client, auth(tenant), payload={"n": n})["id"] for n in range(30)]
        engine = start_worker(settings)
        receiver.wait_for(3, timeout=10)
        session = engine.rt.broker.session
        close_broker_connection(getattr(session, which)._transport._sock.getsockname()[1])
        wait_until(lambda: engine.rt.broker.session is not session and engine.consuming.is_set(), timeout=20)
        wait_until(lambda: Delivery.select().where(Delivery.status == "delivered").count() == 30, timeout=30)
    assert {row.attempts for row in Delivery.select()} == {1}, "calls in flight at the cut were recorded, not repeated"
    assert {r.headers["webhook-id"] for r in receiver.requests} == set(events)


def test_a_worker_publishes_on_a_connection_of_its_own_so_flow_control_never_holds_up_its_acks(
    settings: Any, start_worker: Any
) -> None:
    session = start_worker(settings).rt.broker.session
    half = len(session.consumers) // 2
    assert all(channel.connection is session.connection for channel in session.consumers[:half])
    assert session.publisher.connection is session.publishing and session.connection is not session.publishing


def test_a_worker_consumes_the_bulk_queue_on_a_connection_of_its_own_so_a_flood_s_unread_stream_is_apart(
    settings: Any, start_worker: Any
) -> None:
    session = start_worker(settings).rt.broker.session
    half = len(session.consumers) // 2
    assert all(channel.connection is session.bulk_connection for channel in session.consumers[half:])
    assert session.bulk_connection not in (session.connection, session.publishing)
    consumers = {channel.connection: channel for channel in session.consumers}
    assert len(consumers) == 2


def test_a_worker_spreads_its_prefetch_over_channels_and_still_counts_as_one_worker(
    client: Any, tenant: Any, auth: Any, make_settings: Any, start_worker: Any
) -> None:
    settings = make_settings(worker_prefetch=12_000)  # three channels of 4,000 messages, and three for the bulk queue
    with Receiver(always(204)) as receiver:
        create_endpoint(client, auth(tenant), receiver.url)
        events = [send(client, auth(tenant), payload={"n": n})["id"] for n in range(30)]
        engine = start_worker(settings)
        receiver.wait_for(30, timeout=20)
        wait_until(lambda: Delivery.select().where(Delivery.status == "delivered").count() == 30, timeout=20)
        session = engine.rt.broker.session
        assert [channel.is_open for channel in session.consumers] == [True] * 6, "every ack went to its own channel"
        assert asyncio.run_coroutine_threadsafe(session.workers(settings.topology.primary), session.loop).result(10) == 1
    assert sorted(r.headers["webhook-id"] for r in receiver.requests) == sorted(events)


@pytest.mark.postgresql  # kills PostgreSQL server connections
def test_a_worker_rides_out_its_database_connections_being_killed(client: Any, tenant: Any, auth: Any, settings: Any) -> None:
    env = {**settings_env(settings), "PGAPPNAME": "webhooks-worker-under-test"}
    with Receiver(always(204)) as receiver:
        create_endpoint(client, auth(tenant), receiver.url)
        worker = subprocess.Popen([sys.executable, "-m", "webhooks.worker"], env=env, stderr=subprocess.DEVNULL)
        try:
            first = send(client, auth(tenant))
            receiver.wait_for(1, timeout=15)
            wait_until(lambda: Delivery.get(Delivery.event == first["id"]).status == "delivered")
            admin = psycopg2.connect(settings.database_url)
            admin.autocommit = True
            admin.cursor().execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                ("webhooks-worker-under-test",),
            )
            admin.close()
            second = send(client, auth(tenant))
            receiver.wait_for(2, timeout=15)
            wait_until(lambda: Delivery.get(Delivery.event == second["id"]).status == "delivered", timeout=15)
        finally:
            worker.terminate()
            assert worker.wait(timeout=20) == 0


def test_a_sender_that_raises_an_unexpected_error_frees_its_slot_and_the_message_is_delivered_later(
    client: Any, tenant: Any, auth: Any, settings: Any, start_worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    post, raised = Sender.post, []

    async def post_failing_once(self: Sender, url: str, headers: Any, body: bytes) -> Any:
        if not raised:
            raised.append(url)
            raise RuntimeError("a bug in the sender")
        return await post(self, url, headers, body)

    monkeypatch.setattr(Sender, "post", post_failing_once)
    with Receiver(always(204)) as receiver:
        endpoint = create_endpoint(client, auth(tenant), receiver.url)
        event = send(client, auth(tenant))
        engine = start_worker(settings)
        # The message goes back to the queue; the claim's lease (as after a crash) holds it until it ends.
        wait_until(lambda: Delivery.get(Delivery.event == event["id"]).status == "delivered", timeout=30)
    assert raised and len(receiver.requests) == 1
    lane = engine.rt.lanes.lanes[endpoint["id"]]
    wait_until(lambda: engine.rt.lanes.stats()["under_way"] == 0)
    assert lane.window.in_flight == 0 and not lane.sending, "the call that raised gave its window slot back"
