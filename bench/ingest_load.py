#!/usr/bin/env python3
"""Ingestion throughput through gunicorn, single events and batches, on a fresh PostgreSQL database.

Runs the web process the way the Procfile does (``gunicorn -c python:webhooks.gunicorn_conf
'app:create_app()'``, ``WEB_CONCURRENCY=2``) after the release step (``rabbit_setup.py``,
``flask migrate``) on a database and queue prefix of its own; no worker and no clock run,
so the figure is ingestion alone (store, answer, background publish with confirms).
It creates one tenant with ``--endpoints`` endpoints subscribed to everything, warms up,
then sends ``--count`` events of about 1 KB (``bench/payload.py``) from ``bench/loadgen.py``
(raw HTTP/1.1 keep-alive connections in their own processes): one ``POST /v1/events``
each, or with ``--batch N`` one ``POST /v1/events/batch`` per N events. It prints
events/s once per ``--repeat``, the CPU each part of the stack spent per event, and how
long after the last answer the background enqueuer had published (and marked) every
delivery. Afterwards it checks that every accepted event has its deliveries and that
the enqueuer confirmed them all. Queues, database and processes are removed at exit.

``.venv/bin/python bench/ingest_load.py [--count 5000] [--batch 100] [--repeat 3] [--profile out.txt]``

``--profile FILE`` runs ``py-spy record`` on both gunicorn workers during the first
measured run and writes their merged top frames (self and total time) to FILE.
``measure()`` is what ``bench/ingest_steps.py`` runs as a step of ``bench/run.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pika
import psycopg2

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.local import AMQP_URL, PG_ADMIN, free_port, pg_admin  # noqa: E402
from bench.payload import event_request  # noqa: E402

PYTHON = sys.executable
class Stack:
    """Database, queues and gunicorn of one run; ``close()`` removes them all."""

    def __init__(self, endpoints: int, rate_limit: float, gunicorn_args: str = "") -> None:
        self.prefix = f"bench_ingest_{os.getpid()}"
        pg_admin(f'DROP DATABASE IF EXISTS "{self.prefix}" WITH (FORCE)')
        pg_admin(f'CREATE DATABASE "{self.prefix}"')
        self.database_url = f"postgresql://postgres@127.0.0.1:5432/{self.prefix}"
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.metrics_dir = tempfile.mkdtemp(prefix=f"{self.prefix}-metrics-")
        self.env = {
            **os.environ,
            "DATABASE_URL": self.database_url,
            "AMQP_URL": AMQP_URL,
            "QUEUE_PREFIX": self.prefix,
            "ALLOW_PRIVATE_TARGETS": "1",
            "SECRET_KEY": secrets.token_hex(32),
            "FLASK_APP": "app",
            "PROMETHEUS_MULTIPROC_DIR": self.metrics_dir,
            "INGEST_RATE_LIMIT": str(rate_limit),
            "BIND": f"127.0.0.1:{self.port}",
            "WEB_CONCURRENCY": "2",
            "PYTHONUNBUFFERED": "1",
            **({"GUNICORN_CMD_ARGS": gunicorn_args} if gunicorn_args else {}),
        }
        self.web: subprocess.Popen[bytes] | None = None
        (ROOT / "bench" / ".logs").mkdir(exist_ok=True)
        self.log = open(ROOT / "bench" / ".logs" / f"ingest-{self.prefix}.log", "wb")
        self.endpoints = endpoints

    def run(self, *argv: str) -> str:
        out = subprocess.run([PYTHON, *argv], cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise RuntimeError(f"{argv} failed:\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
        return out.stdout

    def start(self, tenants: int = 1) -> list[str]:
        """Start everything; returns the API key of each tenant."""
        self.run("rabbit_setup.py")
        self.run("-m", "flask", "--app", "app", "migrate")
        keys = [json.loads(self.run("-m", "flask", "--app", "app", "tenant", "create", f"bench{i}")
                           .strip().splitlines()[-1])["api_key"] for i in range(tenants)]
        gunicorn = str(Path(PYTHON).parent / "gunicorn")
        self.web = subprocess.Popen([gunicorn, "-c", "python:webhooks.gunicorn_conf", "app:create_app()"], cwd=ROOT,
                                    env=self.env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        with httpx.Client(base_url=self.base_url, timeout=30, trust_env=False) as http:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if http.get("/healthz").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline or self.web.poll() is not None:
                    raise RuntimeError("gunicorn did not come up; see bench/.ingest-*.log")
                time.sleep(0.2)
            for key in keys:
                for i in range(self.endpoints):
                    response = http.post("/v1/endpoints", json={"url": f"http://127.0.0.1:9/ep{i}"},
                                         headers={"Authorization": f"Bearer {key}"})
                    if response.status_code != 201:
                        raise RuntimeError(f"POST /v1/endpoints: {response.status_code} {response.text}")
        return keys

    def worker_pids(self) -> list[int]:
        assert self.web is not None
        out = subprocess.run(["pgrep", "-P", str(self.web.pid)], capture_output=True, text=True)
        return [int(pid) for pid in out.stdout.split()]

    def backend_pids(self) -> list[int]:
        connection = psycopg2.connect(PG_ADMIN)
        try:
            cursor = connection.cursor()
            cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", (self.prefix,))
            return [row[0] for row in cursor.fetchall()]
        finally:
            connection.close()

    def sql(self, query: str) -> Any:
        connection = psycopg2.connect(self.database_url)
        try:
            cursor = connection.cursor()
            cursor.execute(query)
            return cursor.fetchone()[0]
        finally:
            connection.close()

    def close(self) -> None:
        if self.web is not None and self.web.poll() is None:
            os.killpg(self.web.pid, signal.SIGTERM)
            try:
                self.web.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.web.pid, signal.SIGKILL)
        self.log.close()
        shutil.rmtree(self.metrics_dir, ignore_errors=True)
        try:
            connection = pika.BlockingConnection(pika.URLParameters(AMQP_URL))
            channel = connection.channel()
            for queue in self.queues():
                channel.queue_delete(queue)
            channel.exchange_delete(self.prefix)
            connection.close()
        except Exception as error:  # noqa: BLE001 - best effort cleanup
            print(f"cleanup of queues failed: {error}", file=sys.stderr)
        pg_admin(f'DROP DATABASE IF EXISTS "{self.prefix}" WITH (FORCE)')

    def queues(self) -> list[str]:
        from webhooks.config import Settings

        return Settings.from_env(env={"QUEUE_PREFIX": self.prefix}).topology.all_queues()


TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int, kinds: tuple[int, ...] = (11, 12)) -> float:
    """User + system CPU time of one process so far (0 if it is gone); ``kinds=(12,)``: system only."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(fields[k]) for k in kinds) / TICKS


def machine_busy_seconds() -> float:
    """CPU seconds spent by everything on the machine (all cores), from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    return (sum(values[:8]) - idle) / TICKS


class CpuMeter:
    """CPU seconds used by each part of the stack during a run (gunicorn, PostgreSQL, RabbitMQ)."""

    def __init__(self, stack: "Stack") -> None:
        self.stack = stack

    def sample(self) -> dict[str, float]:
        groups = {
            "gunicorn workers": self.stack.worker_pids(),
            "postgres backends": self.stack.backend_pids(),
            "rabbitmq": [int(p) for p in subprocess.run(["pgrep", "-u", "rabbitmq", "beam.smp"], capture_output=True,
                                                        text=True).stdout.split()],
        }
        out = {name: sum(cpu_seconds(pid) for pid in pids) for name, pids in groups.items()}
        out["(gunicorn system part)"] = sum(cpu_seconds(pid, (12,)) for pid in groups["gunicorn workers"])
        out["load generator"] = os.times().children_user + os.times().children_system
        out["whole machine"] = machine_busy_seconds()
        return out


def request_body(batch: int) -> bytes:
    """One event (``batch`` 0) or a list of ``batch`` events, each about 1 KB."""
    if not batch:
        return event_request()
    return json.dumps([json.loads(event_request())] * batch, separators=(",", ":")).encode()


def burst(base_url: str, keys: list[str], count: int, connections: int, processes: int,
          batch: int = 0) -> dict[str, Any]:
    """``count`` events (in requests of ``batch`` events each, or one each), split evenly over the tenants
    (one load run per tenant, at the same time). ``count`` in the answer counts events."""
    if len(keys) > 1:
        from concurrent.futures import ThreadPoolExecutor

        share = max(1, processes // len(keys))
        with ThreadPoolExecutor(len(keys)) as pool:
            results = list(pool.map(
                lambda key: burst(base_url, [key], count // len(keys), connections, share, batch), keys))
        seconds = max(r["seconds"] for r in results)
        statuses: Counter[str] = Counter()
        for r in results:
            statuses.update(r["statuses"])
        total = sum(r["count"] for r in results)
        return {"count": total, "seconds": seconds, "rps": total / seconds, "statuses": dict(statuses)}
    api_key = keys[0]
    body = Path(tempfile.mkstemp(suffix=".json")[1])
    body.write_bytes(request_body(batch))
    requests = count // batch if batch else count
    try:
        out = subprocess.run(
            [PYTHON, "-m", "bench.loadgen", "burst", "--url", f"{base_url}/v1/events{'/batch' if batch else ''}",
             "--body-file", str(body), "--header", f"Authorization: Bearer {api_key}", "--count", str(requests),
             "--connections", str(connections), "--processes", str(processes)],
            cwd=ROOT, capture_output=True, text=True, timeout=600,
        )
    finally:
        body.unlink()
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    result = json.loads(out.stdout)
    events = result["count"] * (batch or 1)
    return {**result, "count": events, "rps": events / result["seconds"]}


def wait_published(stack: "Stack", timeout: float = 120.0) -> float | None:
    """Seconds until no delivery is left unmarked (the enqueuer published and marked them all);
    None: not within ``timeout``."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if stack.sql("SELECT count(*) FROM delivery WHERE enqueued_at IS NULL") == 0:
            return time.monotonic() - started
        time.sleep(0.1)
    return None


def measure(stack: "Stack", keys: list[str], *, count: int, batch: int = 0, repeat: int = 3, warmup: int = 300,
            connections: int = 8, processes: int = 2, profile_to: str | None = None,
            say: Any = print) -> dict[str, Any]:
    """Warm up, then ``repeat`` runs of ``count`` events; events/s, CPU ms per event by part, publish lag."""
    burst(stack.base_url, keys, max(warmup, batch), connections, processes, batch)
    wait_published(stack)
    runs = []
    for run in range(repeat):
        spies = []
        if profile_to and run == 0:
            spies = profile(stack.worker_pids(), count / (4000 if batch else 400) + 2, profile_to)
            time.sleep(1.0)
        meter = CpuMeter(stack)
        before = meter.sample()
        result = burst(stack.base_url, keys, count, connections, processes, batch)
        lag = wait_published(stack)
        after = meter.sample()
        cpu = {name: round(1000 * (after[name] - before[name]) / result["count"], 3) for name in after}
        runs.append({"events": result["count"], "seconds": result["seconds"], "rate": result["rps"],
                     "statuses": result["statuses"], "cpu_ms_per_event": cpu, "published_after_s": lag})
        say(f"run {run + 1}: {result['count']} events in {result['seconds']:.2f} s = {result['rps']:.0f} events/s "
            f"statuses {result['statuses']}; all published {lag if lag is None else round(lag, 2)} s after the last "
            "answer")
        say("  CPU ms per event (publishing included): "
            + ", ".join(f"{name} {value:.3f}" for name, value in cpu.items()))
        for spy in spies:
            spy.wait(120)
        if spies:
            say(summarize_profile(profile_to, stack.worker_pids()))  # type: ignore[arg-type]
    rates = sorted(r["rate"] for r in runs)
    return {"batch": batch, "endpoints": stack.endpoints, "runs": runs, "rate_median": rates[len(rates) // 2],
            "rate_min": rates[0], "rate_max": rates[-1], "connections": connections, "processes": processes}


def check(stack: "Stack") -> dict[str, Any]:
    """Every accepted event has its deliveries, all marked published, and seq has no gap."""
    events = stack.sql("SELECT count(*) FROM event")
    deliveries = stack.sql("SELECT count(*) FROM delivery")
    unmarked = stack.sql("SELECT count(*) FROM delivery WHERE enqueued_at IS NULL")
    seq_gaps = stack.sql("SELECT coalesce(sum(gaps), 0) FROM "
                         "(SELECT max(seq) - count(*) AS gaps FROM event GROUP BY tenant_id) t")
    return {"events": events, "deliveries": deliveries, "expected_deliveries": events * stack.endpoints,
            "unmarked": unmarked, "seq_gaps": int(seq_gaps),
            "ok": deliveries == events * stack.endpoints and seq_gaps == 0 and unmarked == 0}


def profile(pids: list[int], seconds: float, out_path: str) -> list[subprocess.Popen[bytes]]:
    pyspy = shutil.which("py-spy") or str(Path(PYTHON).parent / "py-spy")
    return [
        subprocess.Popen([pyspy, "record", "-p", str(pid), "-d", str(int(seconds)), "-r", "200", "-f", "raw",
                          "-o", f"{out_path}.{pid}.raw", "--nonblocking", "--threads", "--gil"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for pid in pids
    ]


def summarize_profile(out_path: str, pids: list[int], top: int = 40) -> str:
    """Merge py-spy's collapsed stacks: the top frames by self time and by total time."""
    self_time: Counter[str] = Counter()
    total: Counter[str] = Counter()
    by_thread: Counter[str] = Counter()
    samples = 0
    for pid in pids:
        path = Path(f"{out_path}.{pid}.raw")
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            stack, _, n = line.rpartition(" ")
            count = int(n)
            frames = stack.split(";")
            samples += count
            by_thread[frames[0].split(" ")[0] if frames else "?"] += count
            self_time[frames[-1]] += count
            for frame in set(frames[1:]):
                total[frame] += count
    lines = [f"samples: {samples} (both workers, only samples holding the GIL)",
             "", "by thread:"]
    lines += [f"  {100 * n / samples:5.1f}%  {name}" for name, n in by_thread.most_common(10)]
    lines += ["", "self time:"]
    lines += [f"  {100 * n / samples:5.1f}%  {frame}" for frame, n in self_time.most_common(top)]
    lines += ["", "total time:"]
    lines += [f"  {100 * n / samples:5.1f}%  {frame}" for frame, n in total.most_common(top)]
    text = "\n".join(lines)
    Path(out_path).write_text(text + "\n")
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=5000, help="events per run")
    parser.add_argument("--batch", type=int, default=0, help="events per POST /v1/events/batch (0: POST /v1/events)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--endpoints", type=int, default=1, help="per tenant, subscribed to everything")
    parser.add_argument("--tenants", type=int, default=1, help="the events are split over this many tenants")
    parser.add_argument("--connections", type=int, default=8, help="per load process")
    parser.add_argument("--processes", type=int, default=2, help="load generator processes")
    parser.add_argument("--rate-limit", type=float, default=1_000_000.0,
                        help="INGEST_RATE_LIMIT (events/s per tenant); high so that it never refuses")
    parser.add_argument("--gunicorn-args", default="",
                        help="extra gunicorn options (GUNICORN_CMD_ARGS), e.g. '--worker-class gthread --threads 4'")
    parser.add_argument("--profile", help="write py-spy's top frames of the first measured run here")
    args = parser.parse_args()
    stack = Stack(args.endpoints, args.rate_limit, args.gunicorn_args)
    try:
        keys = stack.start(args.tenants)
        result = measure(stack, keys, count=args.count, batch=args.batch, repeat=args.repeat, warmup=args.warmup,
                         connections=args.connections, processes=args.processes, profile_to=args.profile)
        checked = check(stack)
        print(f"events {checked['events']}, deliveries {checked['deliveries']} (expected "
              f"{checked['expected_deliveries']}), not marked enqueued {checked['unmarked']}, seq gaps "
              f"{checked['seq_gaps']}")
        print(f"events/s: min {result['rate_min']:.0f}, median {result['rate_median']:.0f}, "
              f"max {result['rate_max']:.0f}")
        return 0 if checked["ok"] else 1
    finally:
        stack.close()


if __name__ == "__main__":
    sys.exit(main())
