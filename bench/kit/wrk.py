"""wrk, the HTTP load tool the benchmark measures its receiver and the API's ingestion with."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from bench.kit.procs import PROCS, log


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
                     percentile("50"), percentile("99"))


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
