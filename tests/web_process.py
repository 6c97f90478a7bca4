"""The web process as the Procfile runs it (gunicorn with ``webhooks.gunicorn_conf``), for tests.

``WebProcesses.start(settings, **env)`` starts gunicorn serving ``tests.gated_app`` and
returns its URL once it answers; ``SocketGate`` is where that app holds a tenant's events
until the test lets them go. The ``start_web`` and ``socket_gate`` fixtures wrap them.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import httpx

from tests.conftest import settings_env, wait_until
from tests.receivers import unused_port
from webhooks.config import Settings

ROOT = Path(__file__).resolve().parents[1]


class SocketGate:
    """Where ``tests.gated_app`` holds requests: each held request is one connection, let go by one byte."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(30)
        self.held: list[socket.socket] = []

    @property
    def port(self) -> int:
        return int(self.listener.getsockname()[1])

    def wait_for(self, count: int) -> None:
        """Return once ``count`` requests are held (fails after 30 s)."""
        while len(self.held) < count:
            connection, _ = self.listener.accept()
            self.held.append(connection)

    def open(self) -> None:
        for connection in self.held:
            connection.sendall(b"x")
            connection.close()
        self.held = []

    def close(self) -> None:
        self.open()
        self.listener.close()


class WebProcesses:
    """gunicorn web processes started by a test, each logging to a file under ``log_dir``; ``stop`` ends them all."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.running: list[subprocess.Popen[bytes]] = []
        self.logs: list[Path] = []

    def start(self, settings: Settings, app: str = "tests.gated_app:create_app()", **env: str) -> str:
        """Start one serving ``app`` with ``settings`` and ``env`` (for ``tests.gated_app``, ``GATE_TENANT``
        and ``GATE_PORT`` at least); its URL."""
        port = unused_port()
        environment = {**settings_env(settings), "BIND": f"127.0.0.1:{port}", **env}
        log = self.log_dir / f"gunicorn-{len(self.running)}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "gunicorn", "-c", "python:webhooks.gunicorn_conf", app],
                cwd=ROOT, env=environment, stdout=out, stderr=subprocess.STDOUT,
            )
        self.running.append(process)
        self.logs.append(log)
        url = f"http://127.0.0.1:{port}"

        def serving() -> bool:
            assert process.poll() is None, f"gunicorn exited:\n{log.read_text()}"
            try:
                return httpx.get(f"{url}/healthz", timeout=1.0, trust_env=False).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(serving, timeout=120)  # a gunicorn that boots late on a busy machine is no failure; one that exits is
        return url

    def stop(self) -> None:
        for process in self.running:
            process.terminate()
        for process in self.running:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
