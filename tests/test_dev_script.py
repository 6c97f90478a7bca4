"""``./dev run`` as a new user meets it: a second run, credentials and a broker or database that is not there.

Each test runs the real script with the test session's queues and database. (The script's
virtualenv step is a no-op here: the requirements are installed already.)
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

import httpx
import pytest

from tests.conftest import settings_env, wait_until
from tests.receivers import unused_port
from webhooks.config import Settings

ROOT = Path(__file__).resolve().parents[1]


def dev_env(settings: Settings, tmp_path: Path, port: int, **changes: str) -> dict[str, str]:
    """What ``./dev run`` needs to run this test's service on ``port``, metrics under ``tmp_path``."""
    env = {**settings_env(settings), "BIND": f"127.0.0.1:{port}", "WEB_CONCURRENCY": "1",
           "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"), **changes}
    env.pop("VIRTUAL_ENV", None)
    return env


def dev_run(env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``./dev run`` to its end (a run that refuses to start)."""
    return subprocess.run(["./dev", "run"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def running(settings: Settings, tmp_path: Path) -> Iterator[SimpleNamespace]:
    """A ``./dev run`` serving this test's database on a port of its own; Ctrl-C'd at the end."""
    port = unused_port()
    env = dev_env(settings, tmp_path, port)
    log = (tmp_path / "dev-run.log").open("w")
    process = subprocess.Popen(["./dev", "run"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    url = f"http://127.0.0.1:{port}"

    def serving() -> bool:
        assert process.poll() is None, (tmp_path / "dev-run.log").read_text()
        try:
            return httpx.get(f"{url}/healthz", timeout=1.0, trust_env=False).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(serving, timeout=120, interval=0.5)
        yield SimpleNamespace(url=url, env=env, port=port, log=tmp_path / "dev-run.log")
    finally:
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C: honcho stops every process
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def ingested(url: str) -> str:
    """The ``webhooks_events_ingested_total`` lines of the service's ``/metrics``."""
    text = httpx.get(f"{url}/metrics", timeout=10.0, trust_env=False).text
    return "\n".join(line for line in text.splitlines() if line.startswith("webhooks_events_ingested_total"))


def test_a_second_dev_run_refuses_to_start_and_leaves_the_running_ones_metrics_alone(
    running: SimpleNamespace, tenant: SimpleNamespace, tmp_path: Path
) -> None:
    posted = httpx.post(f"{running.url}/v1/events", json={"event_type": "order.created", "payload": {"n": 1}},
                        headers={"Authorization": f"Bearer {tenant.api_key}"}, timeout=10.0, trust_env=False)
    assert posted.status_code == 202
    before = wait_until(lambda: ingested(running.url).endswith(" 1.0") and ingested(running.url), timeout=10)

    second = dev_run(running.env)
    elsewhere = dev_run({**running.env, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "other-metrics")})

    assert second.returncode == 1
    assert "another ./dev run is running" in second.stderr and "stop it first" in second.stderr
    assert elsewhere.returncode == 1
    assert f"port {running.port} is in use" in elsewhere.stderr and "set BIND" in elsewhere.stderr
    assert "Traceback" not in second.stderr + elsewhere.stderr
    assert ingested(running.url) == before  # the running instance's counters are intact


def test_dev_run_masks_the_database_password_and_says_in_one_line_what_is_missing(
    settings: Settings, tmp_path: Path
) -> None:
    env = dev_env(settings, tmp_path, unused_port(),
                  DATABASE_URL="postgresql://postgres:hunter2@127.0.0.1:5432/no_such_database_34")

    result = dev_run(env)

    assert result.returncode == 1
    assert "hunter2" not in result.stdout + result.stderr
    assert "migrating postgresql://postgres:***@127.0.0.1:5432/no_such_database_34" in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error")]
    assert errors == ['Error: database "no_such_database_34" does not exist on PostgreSQL at 127.0.0.1:5432: '
                      "create it (createdb -h 127.0.0.1 -p 5432 -U postgres no_such_database_34), or fix DATABASE_URL"]
    assert "Traceback" not in result.stderr


def test_dev_run_checks_the_port_amqp_url_names_and_says_so_in_one_line(settings: Settings, tmp_path: Path) -> None:
    port = unused_port()
    env = dev_env(settings, tmp_path, unused_port(), AMQP_URL=f"amqp://guest:guest@127.0.0.1:{port}/%2F")

    result = dev_run(env)

    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        f"AMQP_URL names RabbitMQ on 127.0.0.1:{port}, but nothing answers there: start it on that port, "
        "or unset AMQP_URL for the default (localhost:5672, started for you)")
