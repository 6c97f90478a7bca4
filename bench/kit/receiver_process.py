"""The benchmark's receiver (``bench/kit/receiver.py``) in a process of its own, and its control API."""

from __future__ import annotations

from typing import Callable

import httpx

from bench.kit.procs import PROCS, PYTHON, Child, Deadline, wait_port
from bench.kit.services import free_port
from bench.kit.timeline import Call, parse_timeline


class Receiver:
    """The receiver in a process of its own (every request recorded), and its control API."""

    def __init__(self, name: str = "receiver", port: int | None = None) -> None:
        self.name = name
        self.port = port or free_port()
        self.child: Child | None = None
        self.http = httpx.Client(timeout=60.0, trust_env=False)

    def start(self) -> "Receiver":
        self.child = PROCS.start(self.name, [PYTHON, "-m", "bench.kit.receiver", str(self.port)])
        wait_port(self.port, Deadline(15, f"{self.name} start"), self.child)
        return self

    def stop(self) -> None:
        if self.child is not None:
            PROCS.stop(self.child, grace=3.0)
            self.child = None

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def count(self, prefix: str) -> int:
        """Requests received on paths starting with ``prefix``."""
        paths = self.http.get(self.url("/_bench/stats")).json()["paths"]
        return sum(n for path, n in paths.items() if path.startswith(prefix))

    def dump(self, path: str | None = None) -> list[tuple[float, str, str]]:
        """(unix time, webhook-id, path) of every request (to ``path``), in arrival order."""
        calls = parse_timeline(self.http.get(self.url("/_bench/timeline"), params={"path": path} if path else {}).text)
        return [(call.arrival, call.webhook_id, call.path) for call in calls]

    def first_arrivals(self, path: str) -> dict[str, float]:
        """When each ``webhook-id`` first arrived on ``path`` (unix time)."""
        first: dict[str, float] = {}
        for arrived, webhook_id, _ in self.dump(path):
            first.setdefault(webhook_id, arrived)
        return first

    def timeline(self, prefix: str) -> list[Call]:
        """Every request to a path starting with ``prefix``: arrival, end, outcome, in flight at arrival."""
        return parse_timeline(self.http.get(self.url("/_bench/timeline"), params={"prefix": prefix}).text)

    def reset(self) -> None:
        self.http.post(self.url("/_bench/reset"))

    def wait_for(self, prefix: str, count: int, deadline: Deadline, also: Callable[[], None] | None = None) -> None:
        """Until ``count`` requests arrived on paths starting with ``prefix``."""
        deadline.wait(lambda: self.count(prefix) >= count, 0.1, also)
