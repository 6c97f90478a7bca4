"""The service under test, run the way the Procfile runs it, on a fresh PostgreSQL database.

One ``ServiceStack`` is one ``QUEUE_PREFIX`` (``bench_<name>_<pid>``) and one database of
the same name: ``python rabbit_setup.py`` and ``flask --app app migrate`` (the release
step), ``gunicorn -w 2 'app:create_app()'`` (web), ``python -m webhooks.worker`` (as
many as asked) and ``python -m webhooks.clock``. Tenants come from ``flask --app app
tenant create``, endpoints from the HTTP API, events from ``POST /v1/events``.
Queues and the database are removed at exit.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import httpx

from bench import harness
from bench.harness import CLEANUP, PROCS, PYTHON, ROOT, Child, Deadline, Sql
from bench.payload import EVENT_TYPE, event_request


@dataclass
class Tenant:
    id: str
    api_key: str


class ServiceStack:
    def __init__(self, name: str, env: dict[str, str] | None = None, web_workers: int = 2) -> None:
        self.name = name
        self.prefix = f"bench_{name}_{os.getpid()}"
        self.database_url = harness.create_database(self.prefix)
        CLEANUP.add(f"delete queues {self.prefix}.*",
                    lambda: harness.delete_broker_objects(self.prefix + ".", exchanges=[self.prefix]))
        self.env = {
            "DATABASE_URL": self.database_url,
            "AMQP_URL": harness.AMQP_URL,
            "QUEUE_PREFIX": self.prefix,
            "ALLOW_PRIVATE_TARGETS": "1",
            # Set, so that no process writes a generated key under instance/.
            "SECRET_KEY": secrets.token_hex(32),
            "FLASK_APP": "app",
            "PROMETHEUS_MULTIPROC_DIR": tempfile.mkdtemp(prefix=f"{self.prefix}-metrics-"),
            **(env or {}),
        }
        metrics_dir = self.env["PROMETHEUS_MULTIPROC_DIR"]
        CLEANUP.add(f"remove {metrics_dir}", lambda: shutil.rmtree(metrics_dir, ignore_errors=True))
        self.web_workers = web_workers
        self.port = harness.free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.web: Child | None = None
        self.workers: list[Child] = []
        self.clock: Child | None = None
        self.http = httpx.Client(base_url=self.base_url, timeout=30.0, trust_env=False)
        self._sql: Sql | None = None

    # -- processes ---------------------------------------------------------------------------

    def _run(self, *argv: str, timeout: float = 120.0) -> str:
        out = subprocess.run([PYTHON, *argv], cwd=ROOT, env={**os.environ, **self.env}, capture_output=True,
                             text=True, timeout=timeout)
        if out.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({out.returncode}):\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
        return out.stdout

    def release(self) -> None:
        """The Procfile's release step: declare the queues, migrate the database."""
        self._run("rabbit_setup.py")
        self._run("-m", "flask", "--app", "app", "migrate")

    def start_web(self) -> None:
        self.web = PROCS.start(f"{self.name}-web", [PYTHON, "-m", "gunicorn", "-w", str(self.web_workers), "-b",
                                                    f"127.0.0.1:{self.port}", "app:create_app()"], self.env)
        harness.wait_port(self.port, Deadline(60, f"{self.name}: gunicorn start"), self.web)
        deadline = Deadline(60, f"{self.name}: /healthz")
        while True:
            try:
                if self.http.get("/healthz").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            deadline.check()
            time.sleep(0.2)

    def start_workers(self, count: int, env: dict[str, str] | None = None) -> list[Child]:
        started = [
            PROCS.start(f"{self.name}-worker-{len(self.workers) + i}", [PYTHON, "-m", "webhooks.worker"],
                        {**self.env, **(env or {})})
            for i in range(count)
        ]
        self.workers += started
        return started

    def stop_workers(self, grace: float = 20.0) -> None:
        PROCS.stop_many(self.workers, grace)
        self.workers = []

    def start_clock(self, env: dict[str, str] | None = None) -> Child:
        if self.clock is None or not self.clock.alive():
            self.clock = PROCS.start(f"{self.name}-clock", [PYTHON, "-m", "webhooks.clock"], {**self.env, **(env or {})})
        return self.clock

    def check_alive(self) -> None:
        """Raise if a worker, the clock or the web process died."""
        for child in [*self.workers, *( [self.clock] if self.clock else []), *([self.web] if self.web else [])]:
            if not child.alive():
                raise RuntimeError(f"{child.name} exited ({child.popen.returncode}):\n{child.tail()}")

    def close(self) -> None:
        self.stop_workers(grace=5.0)
        for child in (self.clock, self.web):
            if child is not None:
                PROCS.stop(child, grace=5.0)
        self.clock = self.web = None
        if self._sql is not None:
            self._sql.close()
            self._sql = None

    # -- API ---------------------------------------------------------------------------------

    def tenant(self, name: str) -> Tenant:
        out = self._run("-m", "flask", "--app", "app", "tenant", "create", name)
        data = json.loads(out.strip().splitlines()[-1])
        return Tenant(data["id"], data["api_key"])

    def endpoint(self, tenant: Tenant, url: str) -> str:
        response = self.http.post("/v1/endpoints", json={"url": url},
                                  headers={"Authorization": f"Bearer {tenant.api_key}"})
        if response.status_code != 201:
            raise RuntimeError(f"POST /v1/endpoints: {response.status_code} {response.text[:500]}")
        return response.json()["id"]

    @property
    def sql(self) -> Sql:
        if self._sql is None:
            self._sql = Sql(self.database_url)
        return self._sql

    def events_of(self, tenant: Tenant) -> int:
        """Events the benchmark posted (operational events such as ``endpoint.offline`` excluded)."""
        return self.sql.value("SELECT count(*) FROM event WHERE tenant_id = %s AND event_type = %s",
                              (tenant.id, EVENT_TYPE))

    def ingest(self, tenant: Tenant, count: int, deadline: Deadline, threads: int = 2, connections: int = 8) -> dict[str, Any]:
        """POST ``count`` events with wrk (about: in-flight requests may add a few); the
        rate is measured on the server side, from the events' ``created_at``."""
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {tenant.api_key}"}
        script = harness.lua_post_script(event_request(), headers, math.ceil(count / threads))
        before = self.events_of(tenant)
        result = harness.run_wrk(f"{self.base_url}/v1/events", script, threads, connections,
                                 duration=min(deadline.left(), count / 20 + 60),
                                 stop_when=lambda: self.events_of(tenant) - before >= count)
        time.sleep(0.5)  # requests still in flight when wrk was interrupted
        times = [row[0] for row in self.sql.rows(
            "SELECT extract(epoch FROM created_at) FROM event WHERE tenant_id = %s AND event_type = %s "
            "ORDER BY created_at", (tenant.id, EVENT_TYPE))]
        times = [float(t) for t in times[before:]]
        rate, span = harness.steady_rate(times)
        return {"events": len(times), "rate": rate, "seconds": span, "client_requests": result.requests,
                "client_non_2xx": result.non_2xx, "client_socket_errors": result.socket_errors,
                "client_p50_ms": result.p50_ms, "client_p99_ms": result.p99_ms,
                "client_threads": threads, "client_connections": connections}

    def paced(self, tenant: Tenant, count: int, rate: float, timeout: float) -> list[dict[str, Any]]:
        """POST ``count`` events at ``rate`` per second (open loop), in a process of its own."""
        PROCS.log_dir.mkdir(exist_ok=True)
        body = PROCS.log_dir / f"event-{os.getpid()}.json"
        body.write_bytes(event_request())
        out = PROCS.log_dir / f"paced-{self.name}-{time.monotonic_ns()}.json"
        argv = [PYTHON, "-m", "bench.loadgen", "paced", "--url", f"{self.base_url}/v1/events", "--body-file", str(body),
                "--header", f"Authorization: Bearer {tenant.api_key}", "--count", str(count), "--rate", str(rate),
                "--out", str(out)]
        child = PROCS.start(f"{self.name}-paced", argv)
        try:
            child.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            PROCS.stop(child, grace=1.0)
            raise harness.ScenarioTimeout(f"paced sender did not finish within {timeout:.0f} s")
        PROCS.stop(child, grace=1.0)
        if child.popen.returncode != 0:
            raise RuntimeError(f"paced sender failed:\n{child.tail()}")
        results = json.loads(out.read_text())
        out.unlink()
        return results

    def primary_depth(self) -> int:
        return harness.queue_depth(f"{self.prefix}.deliver")
