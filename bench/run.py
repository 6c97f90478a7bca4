#!/usr/bin/env python3
"""The benchmark's one entry point: ``python bench/run.py [options]`` runs ``bench.steps.STEPS`` in ``bench/.venv``
and writes their figures into ``bench/RESULTS.md``; ``python bench/run.py MODE`` runs one of ``MODES`` in this
interpreter (``bench/README.md``)."""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
VENV = BENCH / ".venv"
VENV_PYTHON = VENV / "bin" / "python"
BENCH_REQUIREMENTS = BENCH / "requirements.txt"
SERVICE_REQUIREMENTS = ROOT / "requirements.txt"

#: The modes beside the benchmark: modules with ``add_arguments(parser)`` and ``main(args)`` (the exit status).
MODES = {"chaos": "bench.drills.chaos", "failover": "bench.drills.failover", "cluster": "bench.kit.cluster",
         "page-memory": "bench.drills.page_memory"}


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
    """The options of a run, or of a mode (``args.mode``: its name, None for a run)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] and argv[0] in MODES:
        mode = argparse.ArgumentParser(prog=f"bench/run.py {argv[0]}")
        importlib.import_module(MODES[argv[0]]).add_arguments(mode)
        return argparse.Namespace(**vars(mode.parse_args(argv[1:])), mode=argv[0])
    from bench.steps import STEPS

    parser = argparse.ArgumentParser(description="Run the benchmark's steps and rewrite bench/RESULTS.md; "
                                     f"or `bench/run.py MODE --help`, MODE one of {', '.join(MODES)}.")
    parser.add_argument("--quick", action="store_true", help="small numbers: the whole run in a few minutes")
    parser.add_argument("--events", type=int, help="events per throughput contender (default 20000; --quick 3000); "
                                                   "step retention: events seeded (default 250000)")
    parser.add_argument("--backlog", type=int, help="deliveries in the backlog scenario (default 100000; --quick 5000)")
    parser.add_argument("--release-rate", type=float, default=20.0,
                        help="the service's RELEASE_RATE in the backlog scenario (default 20, the service's own "
                             "default: it paces the drain)")
    parser.add_argument("--from-json", metavar="PATH",
                        help="only rewrite RESULTS.md from the figures of an earlier run (bench/.logs/results.json)")
    parser.add_argument("--only", help=f"comma-separated steps ({','.join(step.name for step in STEPS)}); a partial "
                                       "run prints its tables and leaves RESULTS.md and the plots in bench/ alone")
    for step in STEPS:
        if step.add_arguments is not None:
            step.add_arguments(parser)
    args = parser.parse_args(argv)
    unknown = set(args.only.split(",")) - {step.name for step in STEPS} if args.only else set()
    if unknown:
        parser.error(f"--only: no step {', '.join(sorted(unknown))}")
    return argparse.Namespace(**vars(args), mode=None)


def main() -> int:
    if sys.argv[1:2] and sys.argv[1] in MODES:  # a mode runs here: no bench/.venv
        sys.path.insert(0, str(ROOT))
        from bench.kit.procs import install_exit_handlers

        args = parse_args()
        install_exit_handlers()
        return importlib.import_module(MODES[args.mode]).main(args)
    if sys.argv[1:2] and not sys.argv[1].startswith("-"):  # a mistyped mode: say so before making bench/.venv
        print(f"bench/run.py: no mode {sys.argv[1]!r}; a mode is one of {', '.join(MODES)}, "
              f"and a run takes only options (--help)", file=sys.stderr)
        return 2
    bootstrap()
    sys.path.insert(0, str(ROOT))
    args = parse_args()
    from bench import report
    from bench.kit import services
    from bench.kit.plan import Plan
    from bench.kit.procs import PROCS, install_exit_handlers, log
    from bench.kit.receiver_process import Receiver
    from bench.kit.stack import service_defaults
    from bench.kit.step import Context, guarded
    from bench.kit.wrk import ensure_wrk, wrk_version
    from bench.steps import STEPS

    if args.from_json:
        with open(args.from_json) as handle:
            report.write_results(report.render(json.load(handle)))
        log(f"rewrote the generated section of bench/RESULTS.md from {args.from_json}")
        return 0
    install_exit_handlers()
    plan = Plan.from_args(args)
    only = set(args.only.split(",")) if args.only else None
    steps = [step for step in STEPS if (step.name in only if only is not None else step.full_run)]
    command = os.environ.get("BENCH_COMMAND", "python bench/run.py " + " ".join(sys.argv[1:]))
    started = time.time()
    if ensure_wrk() is None:
        log("wrk is missing and could not be installed (apt-get install wrk): cannot measure the receiver or ingestion")
        return 2
    results: dict[str, Any] = {"command": command, "plan": plan.__dict__, "machine": services.machine(),
                               "versions": services.versions(wrk_version()),
                               "date": time.strftime("%Y-%m-%d %H:%M %Z"), "commit": services.commit(),
                               "service_defaults": service_defaults(),
                               "overridden_service_pins": service_requirements_for_bench()[1]}
    log(f"benchmark: {command}; {plan.processes} worker processes per contender (8 threads each for the "
        f"thread-pool ones; the service with its default settings); logs in {PROCS.log_dir}")
    for stale in PROCS.log_dir.glob("*") if PROCS.log_dir.exists() else []:
        if stale.is_file():
            stale.unlink()  # the logs of the previous run
    receiver = Receiver().start()
    context = Context(receiver, plan, args)
    for step in steps:
        results[step.name] = guarded(step.title, lambda deadline, s=step: s.run(context, deadline),
                                     step.seconds(context))
    receiver.stop()
    results["wall_seconds"] = time.time() - started
    PROCS.log_dir.mkdir(exist_ok=True)
    (PROCS.log_dir / "results.json").write_text(json.dumps(results, indent=2, default=str))
    markdown = report.render(results)
    if only is None:
        report.write_results(markdown)
        report.publish_plots(PROCS.log_dir)
        log(f"wrote the generated section of bench/RESULTS.md ({results['wall_seconds'] / 60:.1f} min)")
    else:
        print(markdown)
        log("partial run (--only): bench/RESULTS.md left alone; raw figures in bench/.logs/results.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
