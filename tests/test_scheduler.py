"""The worker's per-endpoint scheduler: a cap per endpoint, a short line, then refusal."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from webhooks.scheduler import EndpointScheduler


def test_an_endpoint_runs_at_most_its_cap_and_its_line_runs_in_arrival_order():
    executor = ThreadPoolExecutor(8)
    scheduler = EndpointScheduler(executor, per_endpoint=2, hold=3)
    gate, started, order, lock = threading.Event(), [], [], threading.Lock()

    def job(n: int):
        def run() -> None:
            with lock:
                started.append(n)
            gate.wait(5)
            with lock:
                order.append(n)
        return run

    accepted = [scheduler.submit("ep_a", job(n)) for n in range(6)]
    time.sleep(0.1)
    assert accepted == [True, True, True, True, True, False]  # 2 running, 3 waiting, 1 refused
    assert sorted(started) == [0, 1] and scheduler.load("ep_a") == (2, 3)
    gate.set()
    executor.shutdown(wait=True)
    assert started[2:] == [2, 3, 4]  # the line starts in arrival order
    assert sorted(order) == [0, 1, 2, 3, 4]
    assert scheduler.load("ep_a") == (0, 0)


def test_a_busy_endpoint_leaves_threads_for_the_others():
    executor = ThreadPoolExecutor(4)
    scheduler = EndpointScheduler(executor, per_endpoint=2, hold=10)
    slow_gate = threading.Event()
    fast_done = threading.Event()
    for _ in range(10):
        scheduler.submit("ep_slow", lambda: slow_gate.wait(5))
    assert scheduler.submit("ep_fast", fast_done.set)
    assert fast_done.wait(1.0)  # ran while the slow endpoint held only its 2 threads
    slow_gate.set()
    executor.shutdown(wait=True)


def test_a_job_without_an_endpoint_runs_unscheduled():
    executor = ThreadPoolExecutor(1)
    done = threading.Event()
    assert EndpointScheduler(executor, per_endpoint=1, hold=0).submit(None, done.set)
    assert done.wait(1.0)
    executor.shutdown()
