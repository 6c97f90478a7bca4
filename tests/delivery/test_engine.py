"""The delivery engine end to end: fair share, adaptive concurrency, backlogs beyond memory, clean stops.

Real RabbitMQ, a real database, real local receivers; the engine runs in this process
(``start_worker``) or as ``python -m webhooks.worker``.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable

import uvloop

from tests.conftest import queue_messages, settings_env, wait_until
from tests.receivers import Receiver, RecordedRequest, Response, always, pause, sleep_then
from tests.api_helpers import create_endpoint, send
from webhooks.storage.models import Delivery
from webhooks.storage.timeutil import utcnow


class InFlight:
    """A responder that counts the calls it is answering and answers through ``answer(in_flight)``."""

    def __init__(self, answer: Callable[[int], Response]) -> None:
        self.answer = answer
        self.now = 0
        self.peak = 0
        #: In flight when each request arrived, in arrival order.
        self.seen: list[int] = []
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Response:
        with self._lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
            self.seen.append(self.now)
            level = self.now
        try:
            return self.answer(level)
        finally:
            with self._lock:
                self.now -= 1


def delivered(count: int) -> Callable[[], bool]:
    return lambda: Delivery.select().where(Delivery.status == "delivered").count() >= count


def test_a_tenant_flooding_a_slow_endpoint_does_not_hold_back_another_tenant(
    client: Any, tenant: Any, other_tenant: Any, auth: Any, settings: Any, start_worker: Any
) -> None:
    with Receiver(sleep_then(1.0)) as slow, Receiver(always(204)) as quiet:
        create_endpoint(client, auth(tenant), slow.url)
        create_endpoint(client, auth(other_tenant), quiet.url)
        for n in range(600):
            send(client, auth(tenant), payload={"n": n})
        start_worker(settings)
        slow.wait_for(5, timeout=10)
        posted = time.monotonic()
        send(client, auth(other_tenant))
        (request,) = quiet.wait_for(1, timeout=10)
        assert request.received_at - posted < 1.0
        assert len(slow.requests) < 600, "the flood is still draining"


def test_a_backlogged_endpoint_gets_a_window_that_grows_to_match_its_latency(
    client: Any, tenant: Any, auth: Any, settings: Any, start_worker: Any
) -> None:
    receiver_calls = InFlight(lambda level: (pause(0.2), (200, None, b"ok"))[1])
    with Receiver(receiver_calls) as receiver:  # open until the end: a late retry must not fail and cut the window
        endpoint = create_endpoint(client, auth(tenant), receiver.url)
        for n in range(800):
            send(client, auth(tenant), payload={"n": n})
        engine = start_worker(settings)
        receiver.wait_for(800, timeout=40)
        assert receiver_calls.peak >= 32, "the window grew from 4 while the endpoint answered in 200 ms"
        lane = engine.rt.lanes.lanes[endpoint["id"]]
        assert lane.window.size >= 32

        def shown() -> int:
            concurrency = client.get(f"/v1/endpoints/{endpoint['id']}", headers=auth(tenant)).json["concurrency"]
            return concurrency["window"] or 0

        wait_until(lambda: shown() == lane.window.size, timeout=15)  # the API shows the window the worker uses


def test_an_endpoint_that_slows_down_when_it_holds_too_many_calls_is_backed_off(
    client: Any, tenant: Any, auth: Any, settings: Any, start_worker: Any
) -> None:
    # Answers in 20 ms while it holds at most 12 calls, in 1.5 s beyond: a cliff the window must find.
    def answer(level: int) -> Response:
        pause(1.5 if level > 12 else 0.02)
        return 200, None, b"ok"

    receiver_calls = InFlight(answer)
    with Receiver(receiver_calls) as receiver:
        endpoint = create_endpoint(client, auth(tenant), receiver.url)
        for first in range(0, 1500, 100):
            batch = [{"event_type": "order.created", "payload": {"n": n}} for n in range(first, first + 100)]
            assert client.post("/v1/events/batch", json=batch, headers=auth(tenant)).status_code == 202
        engine = start_worker(settings)
        receiver.wait_for(1500, timeout=90)
        window = engine.rt.lanes.lanes[endpoint["id"]].window.size
    # Once the window has found the cliff, only its probes (one every few seconds, each a window's
    # worth of calls held 1.5 s) go over: judged over 1,000 calls, so that one probe more or less
    # in the stretch cannot decide the verdict.
    settled = receiver_calls.seen[500:]
    over = sum(1 for level in settled if level > 12)
    assert over < 0.1 * len(settled), f"{over} of the last {len(settled)} calls went over the cliff"
    assert 6 <= window <= 16, f"the window settled at {window}, not just below the cliff at 12"


def test_calls_to_quick_endpoints_under_way_keep_to_a_tenants_share_of_a_budget_and_calls_to_slow_ones_go_past_it(
    client: Any, tenant: Any, other_tenant: Any, auth: Any, settings: Any, start_worker: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr("webhooks.delivery.engine.QUICK_BUDGET", 16)  # a tenant's share: 8

    def quick_answer(level: int) -> Response:
        pause(0.02)
        return 204, None, b""

    def slow_answer(level: int) -> Response:
        pause(0.3)
        return 204, None, b""

    quick_calls, slow_calls = InFlight(quick_answer), InFlight(slow_answer)
    with Receiver(quick_calls) as quick, Receiver(slow_calls) as slow:
        create_endpoint(client, auth(tenant), quick.url)
        create_endpoint(client, auth(other_tenant), slow.url)
        for first in range(0, 1000, 100):
            for who in (tenant, other_tenant) if first < 400 else (tenant,):
                batch = [{"event_type": "order.created", "payload": {"n": n}} for n in range(first, first + 100)]
                assert client.post("/v1/events/batch", json=batch, headers=auth(who)).status_code == 202
        start_worker(settings)
        quick.wait_for(1000, timeout=60)
        slow.wait_for(400, timeout=60)
    # The quick endpoint's window would grow past 8 within a few of its 20 ms round trips; its
    # tenant's share of the budget holds it there. The slow endpoint's calls (300 ms) wait on the receiver, not on the
    # worker, and are not counted: its window grows past the budget. Until the slow endpoint's first
    # answer it counts as quick, and the quick tenant's share is the shared one (2) for a second
    # after: the 1,000 calls leave its window time to grow to the whole share after that.
    assert quick_calls.peak == 8
    assert slow_calls.peak > 8


def test_a_backlog_beyond_the_prefetch_moves_to_the_database_and_every_delivery_arrives_once(
    client: Any, tenant: Any, other_tenant: Any, auth: Any, make_settings: Any, start_worker: Any
) -> None:
    settings = make_settings(worker_prefetch=40)
    with Receiver(sleep_then(0.05)) as slow, Receiver(always(204)) as quiet:
        create_endpoint(client, auth(tenant), slow.url)
        create_endpoint(client, auth(other_tenant), quiet.url)
        events = [send(client, auth(tenant), payload={"n": n})["id"] for n in range(300)]
        start_worker(settings)
        wait_until(lambda: Delivery.select().where(Delivery.spilled_at.is_null(False)).exists(), timeout=15)
        posted = time.monotonic()
        send(client, auth(other_tenant))
        (request,) = quiet.wait_for(1, timeout=10)
        assert request.received_at - posted < 2.0, "the other tenant's event was not stuck behind the flood"
        wait_until(delivered(301), timeout=60)
    arrivals = [r.headers["webhook-id"] for r in slow.requests]
    assert sorted(arrivals) == sorted(events), "each delivery arrived exactly once"
    assert not Delivery.select().where(Delivery.spilled_at.is_null(False) | (Delivery.attempts != 1)).exists()


def test_a_worker_that_stops_gives_back_what_it_took_from_the_database_and_another_worker_delivers_it(
    client: Any, tenant: Any, auth: Any, make_settings: Any, start_worker: Any
) -> None:
    settings = make_settings(worker_prefetch=40)
    with Receiver(sleep_then(0.05)) as slow:
        create_endpoint(client, auth(tenant), slow.url)
        events = [send(client, auth(tenant), payload={"n": n})["id"] for n in range(300)]
        first = start_worker(settings)
        taken_back = lambda: Delivery.select().where(Delivery.spilled_at > utcnow()).exists()  # noqa: E731
        wait_until(taken_back, timeout=15)  # some of the backlog was taken back into its lane
        first.stop()
        wait_until(lambda: not any(t.name == "worker" and t.is_alive() for t in threading.enumerate()), timeout=15)
        assert not taken_back(), "a stopped worker holds nothing"
        start_worker(settings)
        wait_until(delivered(300), timeout=60)
    arrivals = [r.headers["webhook-id"] for r in slow.requests]
    assert sorted(arrivals) == sorted(events), "each delivery arrived exactly once"


def test_a_worker_has_at_most_half_its_prefetch_in_flight_and_every_delivery_still_arrives(
    client: Any, tenant: Any, auth: Any, make_settings: Any, start_worker: Any
) -> None:
    settings = make_settings(worker_prefetch=40)  # 20 calls in flight at most, 10 messages waiting in memory
    receiver_calls = InFlight(lambda level: (pause(0.5), (204, None, b""))[1])
    with Receiver(receiver_calls) as receiver:
        for n in range(10):  # ten endpoints: windows of 4 would allow 40 calls at once
            create_endpoint(client, auth(tenant), f"{receiver.url}/{n}")
        for n in range(6):
            send(client, auth(tenant), payload={"n": n})
        start_worker(settings)
        receiver.wait_for(60, timeout=60)
        wait_until(delivered(60), timeout=15)  # the receiver stays up until the last answers are recorded
    assert receiver_calls.peak == 20


def test_a_rate_limited_endpoint_waits_in_memory_not_in_the_defer_queue(
    client: Any, tenant: Any, auth: Any, settings: Any, start_worker: Any
) -> None:
    with Receiver(always(204)) as receiver:
        create_endpoint(client, auth(tenant), receiver.url, rate_limit=5)
        start_worker(settings)
        for n in range(20):
            send(client, auth(tenant), payload={"n": n})
        receiver.wait_for(10, timeout=10)
        assert queue_messages(settings.topology.defer) == []
        requests = receiver.wait_for(20, timeout=15)
    span = requests[-1].received_at - requests[0].received_at
    assert span >= (20 - 5) / 5 * 0.9, "at most 5 per second after the first burst of 5"


def test_the_engine_runs_on_uvloop(settings: Any, start_worker: Any) -> None:
    # The rate-limit test above covers what that changes: uvloop's timers may fire up to a
    # millisecond before their time, and a pause that trusted its timer stayed paused for ever.
    engine = start_worker(settings)
    assert isinstance(engine._loop, uvloop.Loop)


def test_ctrl_c_lets_the_call_in_flight_finish_and_logs_no_traceback(client: Any, tenant: Any, auth: Any, settings: Any) -> None:
    with Receiver(sleep_then(1.0, 200)) as receiver:
        create_endpoint(client, auth(tenant), receiver.url)
        worker = subprocess.Popen([sys.executable, "-m", "webhooks.worker"], env=settings_env(settings),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            event = send(client, auth(tenant))
            receiver.wait_for(1, timeout=15)
            worker.send_signal(signal.SIGINT)
            output, _ = worker.communicate(timeout=20)
        finally:
            worker.kill()
    assert worker.returncode == 0
    assert "Traceback" not in output and "Error" not in output, output
    assert Delivery.get(Delivery.event == event["id"]).status == "delivered"
