"""The benchmark receiver (bench/kit/receiver.py): slow and climbing endpoints, and its per-request record."""

from __future__ import annotations

import resource
import socket
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

import httpx
import pytest

from bench.kit.services import free_port
from bench.kit.receiver import Counter, delay_seconds, raise_open_files_limit, start
from bench.kit.timeline import Call, parse_timeline
from tests.conftest import wait_until


@pytest.fixture(scope="module")
def receiver() -> Iterator[tuple[str, Counter]]:
    port = free_port()
    counter = start(port)
    yield f"http://127.0.0.1:{port}", counter


def timeline(base: str, prefix: str) -> list[Call]:
    return parse_timeline(httpx.get(f"{base}/_bench/timeline", params={"prefix": prefix}).text)


def post(url: str, webhook_id: str = "msg_1") -> httpx.Response:
    return httpx.post(url, content=b"{}", headers={"webhook-id": webhook_id}, timeout=30)


def test_slow_path_waits_its_milliseconds_before_answering_200() -> None:
    assert delay_seconds(b"/slow/200/ep1", 1) == 0.2
    assert delay_seconds(b"/slow/5000/inflight/e3", 9999) == 5.0
    assert delay_seconds(b"/anything", 500) == 0.0


def test_climbing_path_holds_its_low_delay_up_to_the_threshold_then_climbs_to_the_high_one() -> None:
    path = b"/climb/50/20/2000/ep"
    assert [delay_seconds(path, n) for n in (1, 50)] == [0.02, 0.02]
    assert delay_seconds(path, 75) == pytest.approx(1.01)
    assert [delay_seconds(path, n) for n in (100, 10_000)] == [2.0, 2.0]


def test_slow_endpoint_answers_after_its_delay_and_records_arrival_answer_and_in_flight(receiver) -> None:
    base, _ = receiver
    with ThreadPoolExecutor(6) as pool:
        statuses = list(pool.map(lambda i: post(f"{base}/slow/300/rec", f"msg_{i}").status_code, range(6)))
    assert statuses == [200] * 6
    calls = timeline(base, "/slow/300/rec")
    assert sorted(call.webhook_id for call in calls) == [f"msg_{i}" for i in range(6)]
    assert all(call.outcome == "a" and call.latency >= 0.3 for call in calls)
    # Each counts the calls to its path outstanding when it arrived, itself included.
    assert sorted(call.in_flight for call in calls)[0] == 1
    assert max(call.in_flight for call in calls) <= 6


def test_climbing_endpoint_delays_a_call_by_the_in_flight_count_it_arrived_with(receiver) -> None:
    base, counter = receiver
    path = "/climb/3/3000/6000/rec"
    with ThreadPoolExecutor(4) as pool:
        first = [pool.submit(post, f"{base}{path}", f"msg_{i}") for i in range(3)]
        wait_until(lambda: counter.in_flight.get(path.encode()) == 3)
        fourth = pool.submit(post, f"{base}{path}", "msg_4")
        assert all(call.result().status_code == 200 for call in [*first, fourth])
    calls = {call.webhook_id: call for call in timeline(base, path)}
    assert sorted(calls[f"msg_{i}"].in_flight for i in range(3)) == [1, 2, 3]
    assert all(calls[f"msg_{i}"].latency >= 3.0 for i in range(3))
    # The 4th found 4 in flight: a third of the way from 3 to 6 (twice the threshold), so 3 s + 1 s.
    assert calls["msg_4"].in_flight == 4
    assert delay_seconds(path.encode(), 4) == 4.0
    assert calls["msg_4"].latency >= 4.0


def test_a_client_that_gives_up_is_recorded_as_abandoned_and_leaves_the_in_flight_count(receiver) -> None:
    base, counter = receiver
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{base}/hang/rec", content=b"{}", timeout=0.3)
    calls = wait_until(lambda: [c for c in timeline(base, "/hang/rec") if c.outcome == "x"])
    assert calls[0].end is not None and calls[0].end >= calls[0].arrival
    assert counter.in_flight[b"/hang/rec"] == 0


def test_answers_keep_request_order_when_a_slow_request_is_followed_on_the_same_connection(receiver) -> None:
    base, _ = receiver
    host, port = base.removeprefix("http://").split(":")
    requests = b"".join(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n" % path
                        for path in (b"/slow/300/order", b"/fail/order"))
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(requests)
        received = b""
        while received.count(b"HTTP/1.1") < 2 or not received.endswith((b"ok", b"fail")):
            received += sock.recv(4096)
    assert received.index(b"200 OK") < received.index(b"500 Internal Server Error")


def test_stats_report_calls_in_flight_now(receiver) -> None:
    base, _ = receiver
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(post, f"{base}/slow/3000/stats")
        wait_until(lambda: httpx.get(f"{base}/_bench/stats").json()["in_flight"] >= 1)
        assert pending.result().status_code == 200
    wait_until(lambda: httpx.get(f"{base}/_bench/stats").json()["in_flight"] == 0)


def test_open_files_limit_is_raised_to_the_hard_limit() -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    assert raise_open_files_limit() == hard
