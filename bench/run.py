#!/usr/bin/env python3
"""Benchmark harness: the service against two floors, dramatiq and Celery, plus scenarios.

``python bench/run.py [--events N] [--quick]`` does everything in one go: it makes its own
virtualenv ``bench/.venv`` (``bench/requirements.txt`` plus the service's
``requirements.txt``), re-runs itself from there, and then, on this machine's RabbitMQ
and PostgreSQL, with one receiver process (``bench/receiver.py``) for everybody:

1. measures the receiver's own capacity (wrk);
2. throughput of the floor (minimal pika + httpx consumer, on the service's quorum queue
   type; again on a classic queue), the async floor (pika ``AsyncioConnection`` +
   aiohttp), dramatiq and Celery: N messages pre-loaded, then one worker process per
   core, 8 threads each (the async floor: 256 messages in flight); the floor also with
   1 and 4 processes;
3. the service end to end, with its default settings: ingestion through gunicorn
   (workers stopped), delivery of the same N events by one worker process per core
   (every attempt logged, PostgreSQL), latency from ``POST /v1/events`` to the receiver
   at 200 events/s, worker memory, and delivery with 1 and 4 worker processes;
4. ingestion of single events and of batches of 100 (``bench/ingest_steps.py``); noisy neighbour,
   ladder fidelity, backlog drain;
5. slow receivers (``bench/engine_steps.py``, ``bench/flood.py``): 50 endpoints answering
   after 200 ms, one such endpoint, one that slows down above 50 calls in flight (plotted),
   a tenant's flood beside another tenant's trickle, 10,000 deliveries in flight;

and rewrites the generated part of ``bench/RESULTS.md`` (between the ``bench:run``
markers) and the plots it links (``bench/*.png``). ``--quick`` uses small numbers.
Every step has a time limit; every process, queue and database it made is removed
at exit, on Ctrl-C too. Logs of every process: ``bench/.logs/``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
VENV = BENCH / ".venv"
VENV_PYTHON = VENV / "bin" / "python"
BENCH_REQUIREMENTS = BENCH / "requirements.txt"
SERVICE_REQUIREMENTS = ROOT / "requirements.txt"


def _requirement_name(line: str) -> str | None:
    line = line.split("#", 1)[0].strip()
    if not line or line.startswith("-"):
        return None
    match = re.match(r"[A-Za-z0-9_.\-]+", line)
    return match.group(0).lower().replace("_", "-") if match else None


def service_requirements_for_bench() -> tuple[str, list[str]]:
    """The service's requirements without the packages that ``bench/requirements.txt`` pins
    itself (the bench's pin wins: Celery pins python-dateutil exactly); and those names."""
    ours = {name: line.split("#", 1)[0].strip() for line in BENCH_REQUIREMENTS.read_text().splitlines()
            if (name := _requirement_name(line))}
    kept, overridden = [], []
    for line in SERVICE_REQUIREMENTS.read_text().splitlines():
        name = _requirement_name(line)
        if name in ours:
            pin = line.split("#", 1)[0].strip()
            if pin.split("==")[-1] != ours[name].split("==")[-1]:
                overridden.append(f"{pin} (here {ours[name].split('==')[-1]})")
        else:
            kept.append(line)
    return "\n".join(kept) + "\n", overridden


def bootstrap() -> None:
    """Make ``bench/.venv`` (no system site packages), install both requirement files, re-exec in it."""
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    if not VENV_PYTHON.exists():
        print(f"creating {VENV.relative_to(ROOT)}", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    service_text, _ = service_requirements_for_bench()
    wanted = hashlib.sha256(BENCH_REQUIREMENTS.read_bytes() + service_text.encode()).hexdigest()
    stamp = VENV / ".requirements.sha256"
    if not stamp.exists() or stamp.read_text().strip() != wanted:
        print("installing bench/requirements.txt and the service's requirements.txt into bench/.venv", flush=True)
        service_file = VENV / "service-requirements.txt"
        service_file.write_text(service_text)
        subprocess.run([str(VENV_PYTHON), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "-r", str(BENCH_REQUIREMENTS), "-r", str(service_file)], check=True)
        stamp.write_text(wanted)
    os.environ.setdefault("BENCH_COMMAND", shlex.join(["python", "bench/run.py", *sys.argv[1:]]))
    os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), str(Path(__file__).resolve()), *sys.argv[1:]])


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run every benchmark and rewrite bench/RESULTS.md.")
    parser.add_argument("--quick", action="store_true", help="small numbers: the whole run in a few minutes")
    parser.add_argument("--events", type=int, help="events per throughput contender (default 20000; --quick 3000)")
    parser.add_argument("--backlog", type=int, help="deliveries in the backlog scenario (default 100000; --quick 5000)")
    parser.add_argument("--backlog-timeout", type=float,
                        help="seconds allowed for the backlog to drain (default 7200; --quick 420)")
    parser.add_argument("--release-rate", type=float, default=20.0,
                        help="the service's RELEASE_RATE in the backlog scenario (default 20, the service's own "
                             "default: it paces the drain)")
    parser.add_argument("--from-json", metavar="PATH",
                        help="only rewrite RESULTS.md from the figures of an earlier run (bench/.logs/results.json)")
    parser.add_argument("--only", help="comma-separated steps (receiver,peers,service,ingest,slow_clients,admission,"
                                       "noisy,ladder,backlog,fanout,slow,climb,flood,flood_fanout,inflight); a "
                                       "partial run prints its tables and "
                                       "leaves RESULTS.md and the plots in bench/ alone")
    return parser.parse_args(argv)


def main() -> int:
    args = parse_args()
    bootstrap()
    sys.path.insert(0, str(ROOT))
    from bench.scenarios import run_everything

    return run_everything(args)


if __name__ == "__main__":
    sys.exit(main())
