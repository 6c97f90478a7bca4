"""Chaos run: real processes, real RabbitMQ and PostgreSQL, faults injected while events flow.

Usage: ``python bench/chaos.py [--events 3000] [--rate 50] [--quick]``

Starts gunicorn (2 workers), 2 delivery workers and a clock against a fresh PostgreSQL
database and a local receiver, sends events at a steady rate (a client that retries
with the same ``Idempotency-Key`` until it gets a 202, as a real service would), and
meanwhile:

- SIGKILLs a delivery worker every few seconds and starts it again;
- stops RabbitMQ (``rabbitmqctl stop_app``) for a while during ingestion, then starts it;
- restarts PostgreSQL once;
- injects a poison message into the primary queue.

Then it waits for the deliveries to settle and prints: events accepted, delivered at
least once, lost (must be 0), duplicates (count and rate), deliveries whose attempt
log is missing (must be 0), and how often the poison message reached the dead-letter
queue (must be 1). Exit status 1 if any of those checks fails.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import pika  # noqa: E402

from bench.kit import outcomes  # noqa: E402
from bench.kit.receiver import start as start_receiver  # noqa: E402
from bench.kit.services import Sql, free_port, machine_line, pg_admin  # noqa: E402
from webhooks.messaging.brokers import connect  # noqa: E402
from webhooks.config import Settings  # noqa: E402

#: The poison message: not JSON, so no worker can take it for a delivery.
POISON_BODY = b"\x00chaos: not a delivery message"


@dataclass
class Run:
    prefix: str
    database: str
    port: int
    receiver_port: int
    env: dict[str, str]
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {text}"
        self.log.append(line)
        print(line, flush=True)

    def spawn(self, name: str, command: list[str]) -> None:
        logfile = open(ROOT / "artifacts" / f"chaos-{name}.log", "ab")
        self.processes[name] = subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=logfile, stderr=logfile)

    def stop_all(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


def sh(*command: str, check: bool = True) -> None:
    subprocess.run(command, check=check, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)


def pg_cluster() -> str:
    return sorted(os.listdir("/etc/postgresql"))[-1]


def setup(args: argparse.Namespace) -> Run:
    prefix = f"chaos_{os.getpid()}"
    pg_admin(f'CREATE DATABASE "{prefix}"')
    (ROOT / "artifacts").mkdir(exist_ok=True)
    run = Run(prefix, prefix, free_port(), free_port(), {})
    run.env = {
        **os.environ,
        "DATABASE_URL": f"postgresql://postgres@127.0.0.1:5432/{prefix}",
        "QUEUE_PREFIX": prefix,
        "RETRY_LADDER": "1s,2s,5s,10s,30s",
        "ALLOW_PRIVATE_TARGETS": "1",
        "DELIVERY_TIMEOUT": "5",
        "RELAY_GRACE": "3",
        "LOG_LEVEL": "INFO",
        "SECRET_KEY": "chaos",
        "FLASK_APP": "app",
    }
    subprocess.run([sys.executable, "rabbit_setup.py"], cwd=ROOT, env=run.env, check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "flask", "migrate"], cwd=ROOT, env=run.env, check=True, capture_output=True)
    return run


def api_key(run: Run) -> str:
    import json

    out = subprocess.run([sys.executable, "-m", "flask", "tenant", "create", "chaos"], cwd=ROOT, env=run.env,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["api_key"]


class Sender(threading.Thread):
    """Posts events at a steady rate; retries each with its idempotency key until a 202."""

    def __init__(self, base: str, key: str, count: int, rate: float) -> None:
        super().__init__(daemon=True)
        self.client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=10)
        self.count, self.rate = count, rate
        self.accepted: dict[str, str] = {}  # event id -> idempotency key
        self.refused = 0

    def run(self) -> None:
        start = time.monotonic()
        for n in range(self.count):
            time.sleep(max(0.0, start + n / self.rate - time.monotonic()))
            key = f"chaos-{n}"
            while True:
                try:
                    response = self.client.post("/v1/events", json={"event_type": "chaos.tick", "payload": {"n": n}},
                                                headers={"Idempotency-Key": key})
                    if response.status_code == 202:
                        self.accepted[response.json()["id"]] = key
                        break
                    self.refused += 1
                except httpx.HTTPError:
                    self.refused += 1
                time.sleep(0.2)


def inject_poison(run: Run) -> None:
    connection = connect(run.env.get("AMQP_URL", Settings.amqp_url), 5)
    connection.channel().basic_publish("", f"{run.prefix}.deliver", POISON_BODY, pika.BasicProperties(delivery_mode=2))
    connection.close()


def faults(run: Run, duration: float, stop: threading.Event, pg_restart: bool) -> None:
    """The fault schedule, spread over the load's ``duration``."""
    worker_cmd = [sys.executable, "-m", "webhooks.worker"]
    plan = [
        (0.15, "poison", lambda: inject_poison(run)),
        (0.25, "broker down", lambda: sh("rabbitmqctl", "stop_app")),
        (0.45, "broker up", lambda: sh("rabbitmqctl", "start_app")),
    ]
    if pg_restart:
        plan.append((0.65, "postgres restart", lambda: sh("pg_ctlcluster", "--skip-systemctl-redirect", pg_cluster(), "main", "restart")))
    start = time.monotonic()
    next_kill = start + 3
    while not stop.is_set():
        elapsed = (time.monotonic() - start) / duration
        while plan and plan[0][0] <= elapsed:
            _, name, action = plan.pop(0)
            run.note(name)
            action()
        if time.monotonic() >= next_kill and elapsed < 1.0:
            victim = random.choice(["worker1", "worker2"])
            run.processes[victim].send_signal(signal.SIGKILL)
            run.processes[victim].wait()
            run.note(f"SIGKILL {victim}; restarting it")
            run.spawn(victim, worker_cmd)
            next_kill = time.monotonic() + random.uniform(3, 6)
        time.sleep(0.1)
    for _, name, action in plan:  # whatever the load finished too early for
        run.note(name)
        action()


def dead_letters(run: Run) -> int:
    connection = connect(run.env.get("AMQP_URL", Settings.amqp_url), 5)
    channel = connection.channel()
    count = 0
    tags = []
    while True:
        method, _, body = channel.basic_get(f"{run.prefix}.dead")
        if method is None:
            break
        tags.append(method.delivery_tag)
        count += body == POISON_BODY
    for tag in tags:
        channel.basic_nack(tag, requeue=True)
    connection.close()
    return count


def settled(run: Run, sender: Sender, received: list[bytes]) -> bool:
    """Every accepted event arrived and no delivery is still waiting for an attempt."""
    if not set(sender.accepted) <= {webhook_id.decode() for webhook_id in received}:
        return False
    sql = Sql(run.env["DATABASE_URL"])
    try:
        return outcomes.unfinished_deliveries(sql) == 0
    finally:
        sql.close()


def check(run: Run, sender: Sender, received: list[bytes]) -> dict[str, float]:
    sql = Sql(run.env["DATABASE_URL"])
    try:
        missing_log, statuses = outcomes.missing_attempt_logs(sql), outcomes.status_counts(sql)
    finally:
        sql.close()
    return {
        **outcomes.arrivals(sender.accepted, [webhook_id.decode() for webhook_id in received]),
        "attempt log missing": missing_log,
        "poison in DLQ": dead_letters(run),
        "refused then retried (non-202)": sender.refused,
        **{f"status {k}": v for k, v in sorted(statuses.items())},
    }


def teardown(run: Run) -> None:
    run.stop_all()
    sh("rabbitmqctl", "start_app", check=False)
    connection = connect(run.env.get("AMQP_URL", Settings.amqp_url), 5)
    channel = connection.channel()
    Settings.from_env(env={}, queue_prefix=run.prefix, ladder=run.env["RETRY_LADDER"]).topology.delete(channel)
    connection.close()
    pg_admin(f'DROP DATABASE IF EXISTS "{run.database}" WITH (FORCE)')


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--quick", action="store_true", help="CI size: 600 events at 40/s, no PostgreSQL restart")
    parser.add_argument("--settle", type=float, default=180.0, help="seconds to wait for deliveries after the load")
    args = parser.parse_args()
    if args.quick:
        args.events, args.rate = 600, 40.0
    run = setup(args)
    counter = start_receiver(run.receiver_port)
    try:
        run.spawn("web", [sys.executable, "-m", "gunicorn", "-w", "2", "-b", f"127.0.0.1:{run.port}", "app:create_app()"])
        run.spawn("worker1", [sys.executable, "-m", "webhooks.worker"])
        run.spawn("worker2", [sys.executable, "-m", "webhooks.worker"])
        run.spawn("clock", [sys.executable, "-m", "webhooks.clock"])
        base = f"http://127.0.0.1:{run.port}"
        for _ in range(100):
            try:
                if httpx.get(base + "/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        key = api_key(run)
        httpx.post(base + "/v1/endpoints", headers={"Authorization": f"Bearer {key}"},
                   json={"url": f"http://127.0.0.1:{run.receiver_port}/hook"}).raise_for_status()
        duration = args.events / args.rate
        run.note(f"sending {args.events} events at {args.rate:g}/s for {duration:.0f}s")
        sender = Sender(base, key, args.events, args.rate)
        stop = threading.Event()
        chaos = threading.Thread(target=faults, args=(run, duration, stop, not args.quick), daemon=True)
        sender.start()
        chaos.start()
        sender.join()
        stop.set()
        chaos.join()
        run.note(f"load done; waiting up to {args.settle:.0f}s for deliveries to settle")
        deadline = time.monotonic() + args.settle
        while time.monotonic() < deadline and not settled(run, sender, counter.webhook_ids):
            time.sleep(1)
        results = check(run, sender, list(counter.webhook_ids))
    finally:
        teardown(run)
    print(machine_line())
    print(f"command: python bench/chaos.py {' '.join(sys.argv[1:])}")
    for name, value in results.items():
        print(f"{name}: {value:.4f}" if isinstance(value, float) else f"{name}: {value}")
    checks = {
        "every accepted event delivered": results["lost"] == 0 and results["accepted"] > 0,
        "every delivery has its attempt log": results["attempt log missing"] == 0,
        "poison message dead-lettered once": results["poison in DLQ"] == 1,
    }
    return outcomes.verdict("chaos", checks)


if __name__ == "__main__":
    sys.exit(main())
