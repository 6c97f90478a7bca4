"""Child processes, time limits, cleanup at exit, and the memory of processes over time.

Every process the harness starts is in ``PROCS`` and everything it creates (queues, databases) in ``CLEANUP``;
both are undone at exit, on SIGINT/SIGTERM too. A child runs in a session of its own, so stopping it stops its
children (dramatiq's worker processes, gunicorn's workers) and nothing else.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

#: The repository root (the service's working directory) and this folder.
ROOT = Path(__file__).resolve().parents[2]
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

    def wait(self, done: Callable[[], Any], every: float = 0.2, also: Callable[[], Any] | None = None) -> None:
        """Until ``done()`` holds: this limit checked (and ``also`` called) every ``every`` seconds."""
        while not done():
            self.check()
            if also is not None:
                also()
            time.sleep(every)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


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

    def start(self, name: str, argv: Sequence[str], env: dict[str, str] | None = None) -> Child:
        self.log_dir.mkdir(exist_ok=True)
        log_path = self.log_dir / f"{name}.log"
        handle = open(log_path, "ab")
        handle.write(f"\n=== {time.strftime('%H:%M:%S')} {' '.join(argv)[:300]}\n".encode())
        handle.flush()
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        popen = subprocess.Popen(list(argv), cwd=ROOT, env=full_env, stdout=handle, stderr=subprocess.STDOUT,
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


def check_alive(children: Iterable[Child | None]) -> None:
    """Raise, with the end of its log, if one of ``children`` exited."""
    for child in children:
        if child is not None and not child.alive():
            raise RuntimeError(f"{child.name} exited ({child.popen.returncode}):\n{child.tail()}")


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def wait_port(port: int, deadline: Deadline, child: Child | None = None) -> None:
    deadline.wait(lambda: port_open(port), 0.1, lambda: check_alive([child]))


class Sampler:
    """Calls ``sample()`` every ``interval`` seconds, in a thread, while in a ``with``."""

    interval: float = 1.0

    def __enter__(self) -> Any:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
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
        raise NotImplementedError


class RssSampler(Sampler):
    """Samples the resident memory of some processes (and their children) every ``interval`` seconds."""

    def __init__(self, children: Sequence[Child], interval: float = 1.0) -> None:
        self.children = list(children)
        self.interval = interval
        #: (seconds since start, {pid: rss bytes}) per sample.
        self.samples: list[tuple[float, dict[int, int]]] = []
        self._t0 = time.monotonic()
        #: ``time.time()`` at the start: a sample's offset plus this is its wall-clock time.
        self.wall_t0 = time.time()

    def sample(self) -> None:
        import psutil  # the benchmark's own virtualenv has it; the service's (the drills') need not

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

    def summary(self) -> dict[str, Any]:
        largest = self.largest_process_mib()
        if not largest:
            return {}
        return {"start_mib": largest[0], "peak_mib": max(largest), "end_mib": largest[-1],
                "peak_total_mib": max(sum(rss.values()) for _, rss in self.samples) / 2**20, "samples": len(largest)}
