"""The service under test as the Procfile runs it (release step, gunicorn, workers, clock), on a PostgreSQL database
and a ``QUEUE_PREFIX`` of its own (``ServiceStack``: both ``bench_<name>_<pid>``, removed at exit), and the load
it is given: tenants from ``flask tenant create``, endpoints and events from the HTTP API.
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
from collections import defaultdict
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

import httpx

from bench.kit import services
from bench.kit.procs import (
    CLEANUP, PROCS, PYTHON, ROOT, Child, Deadline, RssSampler, ScenarioTimeout, check_alive, log, wait_port,
)
from bench.kit.payload import EVENT_TYPE, event_request
from bench.kit.services import Sql
from bench.kit.stats import percentile, steady_rate
from bench.kit.wrk import lua_post_script, run_wrk


class Arrivals(Protocol):
    """What counts a delivery run's arrivals: the receiver, or a step's sink of another kind."""

    def count(self, prefix: str) -> int: ...


@dataclass
class Tenant:
    id: str
    api_key: str


#: Seconds the queued messages may stay unchanged while pre-loading before the step goes on without it.
PRELOAD_SETTLED = 10.0

#: The service's settings whose defaults the report states (environment name: ``Settings`` field).
REPORTED_SETTINGS = {"ENDPOINT_MAX_IN_FLIGHT": "endpoint_max_in_flight", "WORKER_PREFETCH": "worker_prefetch",
                     "WORKER_THREADS": "worker_threads", "DELIVERY_TIMEOUT": "delivery_timeout"}


def service_defaults() -> dict[str, Any]:
    """The defaults of ``REPORTED_SETTINGS`` in this checkout's own ``Settings`` (one it does not have left out)."""
    from webhooks.config import Settings

    settings = Settings.from_env(env={})
    return {name: getattr(settings, field) for name, field in REPORTED_SETTINGS.items() if hasattr(settings, field)}


@dataclass
class Load:
    """A running ``bench.kit.loadgen`` process and the file it writes its results to."""

    child: Child
    out: Path

    def results(self, grace: float = 30.0) -> Any:
        """Stop starting requests (SIGTERM; a finished sender ignores it), wait for those started, read them all."""
        PROCS.stop(self.child, grace=grace)
        if not self.out.exists():
            raise RuntimeError(f"the load generator wrote no results ({self.child.popen.returncode}):\n"
                               f"{self.child.tail()}")
        results = json.loads(self.out.read_text())
        self.out.unlink()
        return results


@dataclass
class DeliveryRun:
    """Workers started on a pre-loaded queue, stopped when every delivery arrived or time ran out."""

    started: float
    ended: float
    finished: bool
    arrivals: int
    rss: RssSampler
    #: Whatever ``sample()`` returned, every poll.
    samples: list[Any]


#: The stages of one event's way from the web to its endpoint, from the timestamps the service records.
LATENCY_STAGES = (
    ("202 → claimed", "claimed", "answered"),
    ("202 → marked published", "published", "answered"),
    ("marked published → claimed", "claimed", "published"),
    ("claimed → arrival", "arrival", "claimed"),
)


class ServiceStack:
    def __init__(self, name: str, env: dict[str, str] | None = None) -> None:
        self.name = name
        #: The service's settings this stack changes from their defaults (the report names them).
        self.overrides = dict(env or {})
        self.prefix = f"bench_{name}_{os.getpid()}"
        self.database_url = services.fresh_database(self.prefix)
        CLEANUP.add(f"drop database {self.prefix}", lambda: services.drop_database(self.prefix))
        self.own_broker = (env or {}).get("AMQP_URL", services.AMQP_URL) == services.AMQP_URL
        if self.own_broker:
            # (A stack on a broker of its own, such as a drill's, goes away with it.)
            CLEANUP.add(f"delete queues {self.prefix}.*", self.delete_queues)
        self.env = {
            "DATABASE_URL": self.database_url,
            "AMQP_URL": services.AMQP_URL,
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
        self.port = services.free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.web: Child | None = None
        self.workers: list[Child] = []
        #: Workers started so far: each has a name (and log) of its own.
        self.workers_started = 0
        self.clock: Child | None = None
        self.http = httpx.Client(base_url=self.base_url, timeout=30.0, trust_env=False)
        self._sql: Sql | None = None

    def _run(self, *argv: str, timeout: float = 120.0) -> str:
        out = subprocess.run([PYTHON, *argv], cwd=ROOT, env={**os.environ, **self.env}, capture_output=True,
                             text=True, timeout=timeout)
        if out.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({out.returncode}):\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
        return out.stdout

    def release(self, queues: bool = True, database: bool = True) -> None:
        """The Procfile's release step: declare the queues, migrate the database (either alone: the other waits)."""
        if queues:
            self._run("rabbit_setup.py")
        if database:
            self._run("-m", "flask", "--app", "app", "migrate")

    def start_web(self) -> None:
        # The Procfile's web process: its gunicorn config (gthread workers), 2 processes.
        env = {**self.env, "BIND": f"127.0.0.1:{self.port}", "WEB_CONCURRENCY": "2"}
        self.web = PROCS.start(f"{self.name}-web", [PYTHON, "-m", "gunicorn", "-c", "python:webhooks.gunicorn_conf",
                                                    "app:create_app()"], env)
        wait_port(self.port, Deadline(60, f"{self.name}: gunicorn start"), self.web)
        Deadline(60, f"{self.name}: /healthz").wait(self.healthy)

    def healthy(self) -> bool:
        """Does the web process answer ``/healthz`` with a 200?"""
        try:
            return self.http.get("/healthz").status_code == 200
        except httpx.HTTPError:
            return False

    def start_workers(self, count: int, clock: bool = True) -> list[Child]:
        """``count`` more workers, and the clock if it does not run (unless ``clock`` is False)."""
        started = [PROCS.start(f"{self.name}-worker-{self.workers_started + i}", [PYTHON, "-m", "webhooks.worker"],
                               self.env) for i in range(count)]
        self.workers += started
        self.workers_started += count
        if clock:
            self.start_clock()
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
        check_alive([*self.workers, self.clock, self.web])

    def close(self) -> None:
        PROCS.stop_many([child for child in (*self.workers, self.clock, self.web) if child is not None], 5.0)
        self.workers, self.clock, self.web = [], None, None
        if self._sql is not None:
            self._sql.close()
            self._sql = None

    def flask(self, *argv: str) -> str:
        """Run ``flask --app app <argv>`` on this stack's settings; its output."""
        return self._run("-m", "flask", "--app", "app", *argv)

    def tenant(self, name: str) -> Tenant:
        out = self.flask("tenant", "create", name)
        data = json.loads(out.strip().splitlines()[-1])
        return Tenant(data["id"], data["api_key"])

    def stages(self, rows: list[dict[str, Any]], arrival: dict[str, float]) -> dict[str, Any]:
        """p50 and p99 of each stage of the measured events' first attempts: from the 202 to the worker's
        claim (``attempt.started_at``: published, consumed, handed out, claimed), split at the mark of
        its publish (``delivery.enqueued_at``: the broker's confirm, marked up to 200 ms later for a
        background round, at once for an express publish, so the split says on which side of the
        broker a wait is, not to the millisecond), and from the claim to the receiver (signed and
        sent). One machine, one wall clock."""
        answered = {row["id"]: row["end"] for row in rows if row["id"] in arrival}
        if not answered:
            return {}
        found = self.sql.rows(
            "SELECT d.event_id, extract(epoch FROM min(a.started_at)), extract(epoch FROM min(d.enqueued_at))"
            " FROM delivery d JOIN attempt a ON a.delivery_id = d.id WHERE d.event_id = ANY(%s) GROUP BY d.event_id",
            (list(answered),))
        spans: dict[str, list[float]] = defaultdict(list)
        for event_id, claimed, published in found:
            times = {"answered": answered[event_id], "claimed": float(claimed), "arrival": arrival[event_id],
                     "published": None if published is None else float(published)}
            for name, end, start in LATENCY_STAGES:
                if times[end] is not None and times[start] is not None:
                    spans[name].append((times[end] - times[start]) * 1000)
        return {name: {"p50_ms": percentile(spans[name], 50), "p99_ms": percentile(spans[name], 99)}
                for name, _, _ in LATENCY_STAGES if spans[name]}

    def latencies(self, rows: list[dict[str, Any]], first: dict[str, float]) -> dict[str, Any]:
        """Of accepted paced ``rows`` and each event's first arrival (``Receiver.first_arrivals``): POST start
        → arrival (p50, p90, p99, max, in ms), the POST until its 202 and the 202 → arrival (p50, p99), how
        many arrived, and the ``stages``."""
        arrived = [row for row in rows if row["id"] in first]
        spans = {"": [(first[row["id"]] - row["start"]) * 1000 for row in arrived],
                 "post_": [(row["end"] - row["start"]) * 1000 for row in rows],
                 "after_answer_": [(first[row["id"]] - row["end"]) * 1000 for row in arrived]}
        figures: dict[str, Any] = {"delivered": len(arrived), "missing": len(rows) - len(arrived),
                                   "p90_ms": percentile(spans[""], 90), "max_ms": max(spans[""], default=float("nan"))}
        for name, values in spans.items():
            figures.update({f"{name}p50_ms": percentile(values, 50), f"{name}p99_ms": percentile(values, 99)})
        return {**figures, "stages": self.stages(rows, first)}

    def endpoint(self, tenant: Tenant, url: str, **fields: Any) -> str:
        """A new endpoint of ``tenant`` (``fields``: more of ``POST /v1/endpoints``, e.g. ``event_types``)."""
        response = self.http.post("/v1/endpoints", json={"url": url, **fields},
                                  headers={"Authorization": f"Bearer {tenant.api_key}"})
        if response.status_code != 201:
            raise RuntimeError(f"POST /v1/endpoints: {response.status_code} {response.text[:500]}")
        return response.json()["id"]

    @property
    def sql(self) -> Sql:
        if self._sql is None:
            self._sql = Sql(self.database_url)
        return self._sql

    def status_counts(self, endpoint: str | None = None) -> dict[str, int]:
        """Deliveries by status (of one endpoint's, or all)."""
        where = "WHERE endpoint_id = %s" if endpoint else ""
        return dict(self.sql.rows(f"SELECT status, count(*) FROM delivery {where} GROUP BY status ORDER BY status",
                                  (endpoint,) if endpoint else ()))

    def events_of(self, tenant: Tenant) -> int:
        """Events the benchmark posted (operational events such as ``endpoint.offline`` excluded)."""
        return self.sql.value("SELECT count(*) FROM event WHERE tenant_id = %s AND event_type = %s",
                              (tenant.id, EVENT_TYPE))

    def ingest(self, tenant: Tenant, count: int, deadline: Deadline, threads: int = 2, connections: int = 4) -> dict[str, Any]:
        """POST about ``count`` events with wrk (requests in flight may add a few), the rate measured on the server
        side from the events' ``created_at``. wrk does not wait out a 429, so it keeps to a few connections (a
        client's requests beyond ``TENANT_MAX_WAITING_REQUESTS`` waiting in a web process would be refused)."""
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {tenant.api_key}"}
        script = lua_post_script(event_request(), headers, math.ceil(count / threads))
        before = self.events_of(tenant)
        result = run_wrk(f"{self.base_url}/v1/events", script, threads, connections,
                                 duration=min(deadline.left(), count / 20 + 60),
                                 stop_when=lambda: self.events_of(tenant) - before >= count)
        time.sleep(0.5)  # requests still in flight when wrk was interrupted
        times = [row[0] for row in self.sql.rows(
            "SELECT extract(epoch FROM created_at) FROM event WHERE tenant_id = %s AND event_type = %s "
            "ORDER BY created_at", (tenant.id, EVENT_TYPE))]
        times = [float(t) for t in times[before:]]
        rate, span = steady_rate(times)
        return {"events": len(times), "rate": rate, "seconds": span, "client_requests": result.requests,
                "client_non_2xx": result.non_2xx, "client_socket_errors": result.socket_errors,
                "client_p50_ms": result.p50_ms, "client_p99_ms": result.p99_ms,
                "client_threads": threads, "client_connections": connections}

    def paced(self, tenant: Tenant, count: int, rate: float, timeout: float, event_types: list[str] | None = None,
              idempotency_prefix: str | None = None) -> list[dict[str, Any]]:
        """POST ``count`` events at ``rate`` per second, ``event_types`` in turn; with ``idempotency_prefix`` each is
        sent again until accepted (``bench/kit/loadgen.py paced``)."""
        sender = self.start_paced(tenant, count, rate, event_types, idempotency_prefix)
        try:
            sender.child.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            PROCS.stop(sender.child, grace=1.0)
            raise ScenarioTimeout(f"paced sender did not finish within {timeout:.0f} s")
        return sender.results()

    def start_paced(self, tenant: Tenant, count: int, rate: float, event_types: list[str] | None = None,
                    idempotency_prefix: str | None = None) -> Load:
        """Start POSTing up to ``count`` events at ``rate`` per second; ``results()`` stops it and reads them."""
        idempotency = ["--idempotency-prefix", idempotency_prefix] if idempotency_prefix else []
        return self.start_load("paced", tenant.api_key, [event_request(t) for t in event_types or [EVENT_TYPE]],
                               count, "--rate", str(rate), *idempotency)

    def start_load(self, mode: str, api_key: str, bodies: list[bytes], count: int, *options: str,
                   path: str = "/v1/events") -> Load:
        """Start ``python -m bench.kit.loadgen <mode>`` sending ``count`` requests to ``path`` with ``api_key``,
        their bodies ``bodies`` taken in turn; the process and the file it writes its results to."""
        PROCS.log_dir.mkdir(exist_ok=True)
        stamp = f"{self.name}-{mode}-{time.monotonic_ns()}"
        files = []
        for index, body in enumerate(bodies):
            file = PROCS.log_dir / f"{stamp}-{index}.json"
            file.write_bytes(body)
            files += ["--body-file", str(file)]
        out = PROCS.log_dir / f"{stamp}.out.json"
        argv = [PYTHON, "-m", "bench.kit.loadgen", mode, "--url", f"{self.base_url}{path}", *files,
                "--header", f"Authorization: Bearer {api_key}", "--count", str(count), *options, "--out", str(out)]
        return Load(PROCS.start(f"{self.name}-{mode}", argv), out)

    def preload(self, tenant: Tenant, events: int, fanout: int, deadline: Deadline) -> dict[str, Any]:
        """POST about ``events`` events (workers stopped) and wait until every delivery's
        message (``fanout`` per event) is queued; returns ``ingest``'s figures."""
        ingest = self.ingest(tenant, events, deadline)
        expected, depth, changed = ingest["events"] * fanout, -1, time.monotonic()
        while depth < expected:
            deadline.check()
            now_depth = self.queued()
            if now_depth != depth:
                depth, changed = now_depth, time.monotonic()
            elif time.monotonic() - changed > PRELOAD_SETTLED:
                # A service that queues deliveries otherwise (not one message each) must not stall the step.
                log(f"   the queues settled at {depth:,} messages for {expected:,} deliveries; going on")
                break
            time.sleep(0.2)
        return ingest

    def deliver(self, receiver: Arrivals, prefix: str, expected: int, processes: int, seconds: float,
                deadline: Deadline, sample: Callable[[], Any] | None = None, every: float = 0.5,
                rss_every: float = 1.0) -> DeliveryRun:
        """Start ``processes`` workers (and the clock), poll every ``every`` seconds until ``expected`` arrived at
        ``receiver`` on paths under ``prefix`` or ``seconds`` passed, stop the workers; their RSS sampled all along."""
        workers = self.start_workers(processes)
        samples: list[Any] = []
        try:
            with RssSampler(workers, rss_every) as rss:
                started = time.time()
                while (arrived := receiver.count(prefix)) < expected and time.time() - started < seconds:
                    deadline.check()
                    self.check_alive()
                    if sample is not None:
                        samples.append(sample())
                    time.sleep(every)
                ended = time.time()
        finally:
            self.stop_workers()
        return DeliveryRun(started, ended, arrived >= expected, arrived, rss, samples)

    def queued(self) -> int:
        """Messages waiting in the queues the workers consume: the primary queue and the bulk queue, where a
        tenant far over its share of new deliveries (a pre-loaded step's) has the rest of them published."""
        return sum(services.queue_depth(f"{self.prefix}.{queue}") for queue in ("deliver", "bulk"))

    def web_worker_pids(self) -> list[int]:
        """The gunicorn worker processes (children of the web process)."""
        assert self.web is not None
        out = subprocess.run(["pgrep", "-P", str(self.web.pid)], capture_output=True, text=True)
        return [int(pid) for pid in out.stdout.split()]

    def backend_pids(self) -> list[int]:
        """PostgreSQL's backends serving this stack's database."""
        with closing(Sql(services.PG_ADMIN)) as admin:
            return [pid for (pid,) in admin.rows("SELECT pid FROM pg_stat_activity WHERE datname = %s", (self.prefix,))]

    def burst(self, api_key: str, body: bytes, count: int, connections: int, processes: int,
              batch: int = 0) -> dict[str, Any]:
        """POST ``count`` events as fast as the API answers: ``body`` is one event (``batch`` 0) or a list of
        ``batch`` events for ``/v1/events/batch``. ``count`` and ``rps`` in the answer count events."""
        load = self.start_load("burst", api_key, [body], count // batch if batch else count,
                               "--connections", str(connections), "--processes", str(processes),
                               path="/v1/events/batch" if batch else "/v1/events")
        load.child.popen.wait(600)
        result = load.results()
        events = result["count"] * (batch or 1)
        return {**result, "count": events, "rps": events / result["seconds"]}

    def wait_published(self, timeout: float = 120.0) -> float | None:
        """Seconds until every delivery is marked published; None if not within ``timeout``."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self.sql.value("SELECT count(*) FROM delivery WHERE enqueued_at IS NULL") == 0:
                return time.monotonic() - started
            time.sleep(0.1)
        return None

    def ingestion_check(self) -> dict[str, Any]:
        """One delivery per event (every event to one endpoint), all marked published, and no gap in ``seq``."""
        events = self.sql.value("SELECT count(*) FROM event")
        deliveries = self.sql.value("SELECT count(*) FROM delivery")
        unmarked = self.sql.value("SELECT count(*) FROM delivery WHERE enqueued_at IS NULL")
        seq_gaps = int(self.sql.value("SELECT coalesce(sum(gaps), 0) FROM "
                                      "(SELECT max(seq) - count(*) AS gaps FROM event GROUP BY tenant_id) t"))
        return {"events": events, "deliveries": deliveries, "expected_deliveries": events, "unmarked": unmarked,
                "seq_gaps": seq_gaps, "ok": deliveries == events and seq_gaps == 0 and unmarked == 0}

    def delete_queues(self) -> None:
        services.delete_broker_objects(self.prefix + ".", exchanges=[self.prefix])

    def remove(self) -> None:
        """Stop every process and remove the queues and the database now (not only at exit)."""
        self.close()
        if self.own_broker:
            self.delete_queues()
        services.drop_database(self.prefix)
        shutil.rmtree(self.env["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)


@contextmanager
def running(name: str, env: dict[str, str] | None = None, remove: bool = False) -> Iterator[ServiceStack]:
    """A fresh stack (``env``: the settings it changes), released, its web process answering; afterwards its
    processes stopped and, with ``remove``, its queues and database dropped at once rather than at exit."""
    stack = ServiceStack(name, env)
    try:
        stack.release()
        stack.start_web()
        yield stack
    finally:
        if remove:
            stack.remove()
        else:
            stack.close()
