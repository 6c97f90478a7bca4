"""Plumbing for ``bench/run.py``: child processes, deadlines, RSS sampling, the receiver,
RabbitMQ and PostgreSQL housekeeping, wrk.

Everything the harness starts is registered in ``PROCS`` and everything it creates
(queues, databases) in ``CLEANUP``; both are undone at exit, on SIGINT/SIGTERM too.
Child processes run in their own session, so stopping one stops its children
(dramatiq's worker processes, gunicorn's workers) and nothing else.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import httpx
import pika
import pika.exceptions
import psycopg2

from bench.local import AMQP_URL, PG_ADMIN, free_port, pg_admin
from bench.timeline import Call, parse_timeline

#: The repository root (the service's working directory) and this folder.
ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"

#: Python of the benchmark's own virtualenv (every child process runs with it).
PYTHON = sys.executable
VENV_BIN = Path(sys.executable).parent



class ScenarioTimeout(Exception):
    """A scenario ran past its time limit."""


class Deadline:
    """A time limit for one scenario or step; ``check()`` raises ScenarioTimeout once past."""

    def __init__(self, seconds: float, what: str) -> None:
        self.seconds, self.what = seconds, what
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def check(self) -> None:
        if time.monotonic() > self.end:
            raise ScenarioTimeout(f"{self.what}: not done within {self.seconds:.0f} s")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# -- processes -----------------------------------------------------------------------------------


@dataclass
class Child:
    name: str
    popen: subprocess.Popen
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class Procs:
    """Every child process the harness started, so all of them can be stopped at exit."""

    def __init__(self) -> None:
        self.children: list[Child] = []
        self.log_dir = BENCH / ".logs"
        self._lock = threading.Lock()

    def start(self, name: str, argv: Sequence[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> Child:
        self.log_dir.mkdir(exist_ok=True)
        log_path = self.log_dir / f"{name}.log"
        handle = open(log_path, "ab")
        handle.write(f"\n=== {time.strftime('%H:%M:%S')} {' '.join(argv)[:300]}\n".encode())
        handle.flush()
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        popen = subprocess.Popen(list(argv), cwd=cwd, env=full_env, stdout=handle, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        handle.close()
        child = Child(name, popen, log_path)
        with self._lock:
            self.children.append(child)
        return child

    def stop(self, child: Child, grace: float = 15.0, sig: int = signal.SIGTERM) -> None:
        """Signal the child's process group, wait ``grace`` seconds, then kill it."""
        if child.alive():
            _signal_group(child.pid, sig)
            try:
                child.popen.wait(grace)
            except subprocess.TimeoutExpired:
                _signal_group(child.pid, signal.SIGKILL)
                child.popen.wait(5)
        # Anything left in its session (a worker process whose parent died) goes too.
        _signal_group(child.pid, signal.SIGKILL)
        with self._lock:
            if child in self.children:
                self.children.remove(child)

    def stop_many(self, children: Iterable[Child], grace: float = 15.0) -> None:
        children = list(children)
        for child in children:
            if child.alive():
                _signal_group(child.pid, signal.SIGTERM)
        end = time.monotonic() + grace
        for child in children:
            try:
                child.popen.wait(max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for child in children:
            self.stop(child, grace=1.0, sig=signal.SIGKILL)

    def stop_all(self) -> None:
        with self._lock:
            children = list(self.children)
        for child in children:
            _signal_group(child.pid, signal.SIGKILL)
            try:
                child.popen.wait(5)
            except subprocess.TimeoutExpired:
                pass
        with self._lock:
            self.children.clear()


def _signal_group(pid: int, sig: int) -> None:
    # Every signal the harness sends is logged with its caller, for post-mortems.
    callers = " < ".join(f"{frame.name}:{frame.lineno}" for frame in traceback.extract_stack()[-6:-1])
    try:
        with open(PROCS.log_dir / "signals.log", "a") as handle:
            handle.write(f"{time.strftime('%H:%M:%S')} killpg({pid}, {sig}) from {callers}\n")
    except OSError:
        pass
    try:
        os.killpg(pid, sig)  # the child leads its own session: this reaches only its descendants
    except (ProcessLookupError, PermissionError):
        pass


PROCS = Procs()


class Cleanup:
    """Undo steps (delete queues, drop databases), run last-in first-out, once."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, Callable[[], Any]]] = []

    def add(self, what: str, step: Callable[[], Any]) -> None:
        self.steps.append((what, step))

    def run(self) -> None:
        while self.steps:
            what, step = self.steps.pop()
            try:
                step()
            except Exception as error:  # noqa: BLE001 - clean up as much as possible
                print(f"cleanup: {what} failed: {error!r}", file=sys.stderr)


CLEANUP = Cleanup()


def _exit_cleanup() -> None:
    PROCS.stop_all()
    CLEANUP.run()


def install_exit_handlers() -> None:
    """Stop every child and undo every step at exit, on SIGINT and SIGTERM too."""
    atexit.register(_exit_cleanup)

    def on_signal(signum: int, _frame: Any) -> None:
        print(f"\nsignal {signum}: stopping child processes and cleaning up", file=sys.stderr, flush=True)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _exit_cleanup()
        os._exit(130)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)


# -- ports ---------------------------------------------------------------------------------------


def wait_port(port: int, deadline: Deadline, child: Child | None = None) -> None:
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if child is not None and not child.alive():
                raise RuntimeError(f"{child.name} exited ({child.popen.returncode}):\n{child.tail()}")
            deadline.check()
            time.sleep(0.1)


# -- memory --------------------------------------------------------------------------------------


class RssSampler:
    """Samples the resident memory of some processes (and their children) every ``interval`` seconds."""

    def __init__(self, children: Sequence[Child], interval: float = 1.0) -> None:
        self.children = list(children)
        self.interval = interval
        #: (seconds since start, {pid: rss bytes}) per sample.
        self.samples: list[tuple[float, dict[int, int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._t0 = time.monotonic()
        #: ``time.time()`` at the start: a sample's offset plus this is its wall-clock time.
        self.wall_t0 = time.time()

    def __enter__(self) -> "RssSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def sample(self) -> None:
        import psutil  # the benchmark's own virtualenv has it; the service's (bench/failover.py) need not

        rss: dict[int, int] = {}
        for child in self.children:
            try:
                top = psutil.Process(child.pid)
                for proc in [top, *top.children(recursive=True)]:
                    try:
                        rss[proc.pid] = proc.memory_info().rss
                    except psutil.Error:
                        pass
            except psutil.Error:
                pass
        if rss:
            self.samples.append((time.monotonic() - self._t0, rss))

    def largest_process_mib(self) -> list[float]:
        """The largest process's RSS in MiB, per sample."""
        return [max(rss.values()) / 2**20 for _, rss in self.samples]

    def total_mib(self) -> list[float]:
        return [sum(rss.values()) / 2**20 for _, rss in self.samples]

    def summary(self) -> dict[str, Any]:
        largest = self.largest_process_mib()
        if not largest:
            return {}
        return {"start_mib": largest[0], "peak_mib": max(largest), "end_mib": largest[-1],
                "peak_total_mib": max(self.total_mib()), "samples": len(largest)}


# -- the receiver --------------------------------------------------------------------------------


class Receiver:
    """``bench/receiver.py`` in a process of its own, and its control API."""

    def __init__(self, name: str = "receiver", port: int | None = None) -> None:
        self.name = name
        self.port = port or free_port()
        self.child: Child | None = None
        self.http = httpx.Client(timeout=60.0, trust_env=False)

    def start(self) -> "Receiver":
        self.child = PROCS.start(self.name, [PYTHON, str(BENCH / "receiver.py"), str(self.port), "--quiet"])
        wait_port(self.port, Deadline(15, f"{self.name} start"), self.child)
        return self

    def stop(self) -> None:
        if self.child is not None:
            PROCS.stop(self.child, grace=3.0)
            self.child = None

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def stats(self) -> dict[str, Any]:
        return self.http.get(self.url("/_bench/stats")).json()

    def count(self, prefix: str) -> int:
        """Requests received on paths starting with ``prefix``."""
        return sum(n for path, n in self.stats()["paths"].items() if path.startswith(prefix))

    def dump(self, path: str | None = None) -> list[tuple[float, str, str]]:
        """(unix time, webhook-id, path) of every request (to ``path``), in arrival order."""
        params = {"path": path} if path else {}
        text = self.http.get(self.url("/_bench/dump"), params=params).text
        rows = []
        for line in text.splitlines():
            t, webhook_id, p = line.split(" ", 2)
            rows.append((float(t), webhook_id, p))
        return rows

    def timeline(self, prefix: str) -> list[Call]:
        """Every request to a path starting with ``prefix``: arrival, end, outcome, in flight at arrival."""
        return parse_timeline(self.http.get(self.url("/_bench/timeline"), params={"prefix": prefix}).text)

    def reset(self) -> None:
        self.http.post(self.url("/_bench/reset"))

    def wait_for(self, prefix: str, count: int, deadline: Deadline, also: Callable[[], None] | None = None) -> None:
        """Until ``count`` requests arrived on paths starting with ``prefix``."""
        while self.count(prefix) < count:
            deadline.check()
            if also is not None:
                also()
            time.sleep(0.1)


# -- RabbitMQ ------------------------------------------------------------------------------------


def amqp_connection() -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.URLParameters(AMQP_URL))


def rabbitmq_version() -> str:
    connection = amqp_connection()
    try:
        version = connection._impl.server_properties.get("version", b"?")  # noqa: SLF001 - no public accessor
        return version.decode() if isinstance(version, bytes) else str(version)
    finally:
        connection.close()


def queue_depth(name: str) -> int:
    connection = amqp_connection()
    try:
        return connection.channel().queue_declare(name, passive=True).method.message_count
    finally:
        connection.close()


def _rabbitmqctl_names(kind: str) -> list[str] | None:
    if shutil.which("rabbitmqctl") is None:
        return None
    try:
        out = subprocess.run(["rabbitmqctl", "-q", kind, "name"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return [line.strip() for line in out.stdout.splitlines() if line.strip() and line.strip() != "name"]


def delete_broker_objects(prefix: str, queues: Iterable[str] = (), exchanges: Iterable[str] = ()) -> list[str]:
    """Delete the named queues and exchanges and every one whose name starts with ``prefix``."""
    queue_names = set(queues)
    exchange_names = set(exchanges)
    listed = _rabbitmqctl_names("list_queues")
    queue_names.update(q for q in listed or [] if q.startswith(prefix))
    listed_ex = _rabbitmqctl_names("list_exchanges")
    exchange_names.update(e for e in listed_ex or [] if e.startswith(prefix))
    deleted = []
    connection = amqp_connection()
    try:
        for name in sorted(queue_names):
            channel = connection.channel()
            try:
                channel.queue_delete(name)
                deleted.append(name)
                channel.close()
            except pika.exceptions.ChannelClosedByBroker:
                pass
        for name in sorted(exchange_names):
            channel = connection.channel()
            try:
                channel.exchange_delete(name)
                channel.close()
            except pika.exceptions.ChannelClosedByBroker:
                pass
    finally:
        connection.close()
    return deleted


# -- PostgreSQL ----------------------------------------------------------------------------------


def create_database(name: str) -> str:
    """A fresh database (dropped at exit); returns its URL."""
    pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    pg_admin(f'CREATE DATABASE "{name}"')
    CLEANUP.add(f"drop database {name}", lambda: pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    return f"postgresql://postgres@127.0.0.1:5432/{name}"


def postgres_version() -> str:
    connection = psycopg2.connect(PG_ADMIN)
    try:
        cursor = connection.cursor()
        cursor.execute("SHOW server_version")
        return cursor.fetchone()[0]
    finally:
        connection.close()


class Sql:
    """A small read-mostly connection to one benchmark database."""

    def __init__(self, url: str) -> None:
        self.connection = psycopg2.connect(url)
        self.connection.autocommit = True

    def rows(self, sql: str, args: tuple = ()) -> list[tuple]:
        cursor = self.connection.cursor()
        cursor.execute(sql, args)
        return cursor.fetchall()

    def value(self, sql: str, args: tuple = ()) -> Any:
        return self.rows(sql, args)[0][0]

    def close(self) -> None:
        self.connection.close()


# -- wrk -----------------------------------------------------------------------------------------


def ensure_wrk() -> str | None:
    """Path of ``wrk``, installing Debian's package when missing (root, apt-get); None if impossible."""
    found = shutil.which("wrk")
    if found or shutil.which("apt-get") is None or os.geteuid() != 0:
        return found
    log("installing wrk (Debian package) to measure the receiver and the API")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for steps in ([["apt-get", "install", "-y", "-qq", "wrk"]],
                  [["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "wrk"]]):
        if all(subprocess.run(step, env=env, capture_output=True).returncode == 0 for step in steps):
            break
    return shutil.which("wrk")


def wrk_version() -> str:
    wrk = shutil.which("wrk")
    if wrk is None:
        return "not installed"
    out = subprocess.run([wrk, "--version"], capture_output=True, text=True)
    match = re.search(r"wrk (\S+)", out.stdout + out.stderr)
    return match.group(1) if match else "?"


def lua_post_script(body: bytes, headers: dict[str, str], limit_per_thread: int | None = None) -> Path:
    """A wrk script POSTing ``body``; with a limit, each thread stops after that many answers."""
    lines = ['wrk.method = "POST"', f"wrk.body = [==[{body.decode()}]==]"]
    lines += [f'wrk.headers["{k}"] = "{v}"' for k, v in headers.items()]
    if limit_per_thread is not None:
        lines += ["local answered = 0", f"local limit = {limit_per_thread}",
                  "function response(status, headers, body)",
                  "  answered = answered + 1",
                  "  if answered >= limit then wrk.thread:stop() end",
                  "end"]
    path = PROCS.log_dir / f"wrk-{os.getpid()}-{time.monotonic_ns()}.lua"
    PROCS.log_dir.mkdir(exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass
class WrkResult:
    requests: int
    seconds: float
    rps: float
    non_2xx: int
    socket_errors: str
    p50_ms: float | None = None
    p99_ms: float | None = None
    raw: str = field(default="", repr=False)


def parse_wrk(text: str) -> WrkResult:
    requests = re.search(r"(\d+) requests in ([\d.]+)(ms|s|m)", text)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", text)
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    errors = re.search(r"Socket errors: (.*)", text)
    seconds = 0.0
    if requests:
        value, unit = float(requests.group(2)), requests.group(3)
        seconds = value / 1000 if unit == "ms" else value * 60 if unit == "m" else value

    def percentile(p: str) -> float | None:
        match = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s)", text, re.M)
        if not match:
            return None
        value, unit = float(match.group(1)), match.group(2)
        return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value

    return WrkResult(int(requests.group(1)) if requests else 0, seconds, float(rps.group(1)) if rps else 0.0,
                     int(non_2xx.group(1)) if non_2xx else 0, errors.group(1).strip() if errors else "",
                     percentile("50"), percentile("99"), text)


def run_wrk(url: str, script: Path, threads: int, connections: int, duration: float,
            stop_when: Callable[[], bool] | None = None) -> WrkResult:
    """Run wrk; with ``stop_when``, interrupt it (SIGINT: it still prints its summary) once that holds."""
    argv = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{int(duration)}s", "--latency", "-s", str(script), url]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    try:
        if stop_when is not None:
            while process.poll() is None:
                if stop_when():
                    process.send_signal(signal.SIGINT)
                    break
                time.sleep(0.2)
        out, _ = process.communicate(timeout=duration + 30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        script.unlink(missing_ok=True)
    return parse_wrk(out)


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=2, default=str)
