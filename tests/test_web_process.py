"""The web process as the Procfile runs it: gunicorn with ``webhooks.gunicorn_conf``, threaded workers.

Its server (slow clients, turns by client, its own answers) is tested in ``tests/server``.
"""

from __future__ import annotations

import importlib
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import httpx
import pytest

from webhooks.config import Settings
from webhooks.cli import create_tenant
from webhooks.storage.models import Event, IdempotencyKey

EVENT = {"event_type": "order.created", "payload": {"order": 1}}


def test_the_web_process_runs_threaded_workers_sized_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from webhooks import gunicorn_conf

    for name in ("WEB_CONCURRENCY", "WEB_THREADS"):
        monkeypatch.delenv(name, raising=False)
    defaults = importlib.reload(gunicorn_conf)
    assert (defaults.worker_class, defaults.workers, defaults.threads) == ("webhooks.server.worker.BufferingWorker", 2, 8)

    monkeypatch.setenv("WEB_CONCURRENCY", "3")
    monkeypatch.setenv("WEB_THREADS", "16")
    sized = importlib.reload(gunicorn_conf)
    assert (sized.workers, sized.threads) == (3, 16)

    monkeypatch.setenv("WEB_THREADS", "0")
    with pytest.raises(ValueError, match="WEB_THREADS"):
        importlib.reload(gunicorn_conf)
    monkeypatch.delenv("WEB_THREADS")
    monkeypatch.delenv("WEB_CONCURRENCY")
    importlib.reload(gunicorn_conf)


def test_each_web_worker_hands_the_gil_to_a_waiting_thread_within_a_millisecond() -> None:
    """A single event's POST must not wait 5 ms for the GIL at every step while a batch runs in its process."""
    from webhooks import gunicorn_conf

    before = sys.getswitchinterval()
    importlib.reload(gunicorn_conf)
    assert sys.getswitchinterval() == before  # importing the settings changes nothing

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # as gunicorn does in each worker it forks
        gunicorn_conf.post_fork(None, None)
        os.write(write, repr(sys.getswitchinterval()).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    assert float(os.read(read, 64)) == gunicorn_conf.GIL_SWITCH_INTERVAL == 0.001
    assert sys.getswitchinterval() == before


def test_two_web_processes_of_one_user_leave_no_control_socket_for_each_other_to_remove(
    settings: Settings, start_web: Callable[..., str], tmp_path: Path,
) -> None:
    runtime, home = tmp_path / "runtime", tmp_path / "home"
    runtime.mkdir(), home.mkdir()
    for _ in range(2):  # gunicorn's default path is $XDG_RUNTIME_DIR/gunicorn.ctl, else ~/.gunicorn/gunicorn.ctl
        start_web(settings, XDG_RUNTIME_DIR=str(runtime), HOME=str(home), GATE_TENANT="", GATE_PORT="0")

    assert sorted(runtime.iterdir()) == [] and sorted(home.iterdir()) == []


def test_a_threaded_worker_answers_many_tenants_concurrent_requests_as_a_single_thread_would(
    settings: Settings, start_web: Callable[..., str],
) -> None:
    tenants = [SimpleNamespace(**create_tenant(f"tenant-{n}")) for n in range(4)]
    url = start_web(settings, WEB_CONCURRENCY="1", WEB_THREADS="8", TENANT_MAX_CONCURRENT_REQUESTS="0",
                    GATE_TENANT="", GATE_PORT="0")
    client = httpx.Client(base_url=url, timeout=60.0, trust_env=False, limits=httpx.Limits(max_connections=32))

    def requests_of(client_no: int) -> list[tuple[str, int]]:
        """Each client's mix: single events (some with a repeated idempotency key), batches, reads, a 422."""
        answers = []
        for n in range(20):
            who = tenants[(client_no + n) % len(tenants)]
            headers = {"Authorization": f"Bearer {who.api_key}"}
            kind = ("single", "keyed", "batch", "feed", "endpoints", "invalid")[(client_no * 7 + n) % 6]
            if kind == "single":
                response = client.post("/v1/events", json=EVENT, headers=headers)
            elif kind == "keyed":
                response = client.post("/v1/events", json={**EVENT, "idempotency_key": f"k{n % 3}"}, headers=headers)
            elif kind == "batch":
                response = client.post("/v1/events/batch", json=[EVENT] * 10, headers=headers)
            elif kind == "feed":
                response = client.get("/v1/events?after=0&limit=20", headers=headers)
            elif kind == "endpoints":
                response = client.get("/v1/endpoints", headers=headers)
            else:
                response = client.post("/v1/events", json={"event_type": "a b", "payload": {}}, headers=headers)
            answers.append((kind, response.status_code))
        return answers

    with ThreadPoolExecutor(16) as pool:
        answers = [answer for future in [pool.submit(requests_of, n) for n in range(16)] for answer in future.result()]

    expected = {"single": 202, "keyed": 202, "batch": 202, "feed": 200, "endpoints": 200, "invalid": 422}
    assert [(kind, status) for kind, status in answers if status != expected[kind]] == []
    for who in tenants:  # every event of a tenant has its own seq, with no gap
        seqs = sorted(event.seq for event in Event.select(Event.seq).where(Event.tenant == who.id))
        assert seqs == list(range(1, len(seqs) + 1))
        assert IdempotencyKey.select().where(IdempotencyKey.tenant == who.id).count() <= 3  # a key, one event
