"""Where the machine's CPU goes while a step runs: the workers, PostgreSQL, RabbitMQ, the receiver. On 2 cores
the throughput of the service and of its contenders is CPU-bound, and the receiver, the broker and the database
share the cores with the workers: every process on the machine is sampled (psutil), its CPU time since the sample
before goes to its role (``role_of``), and divided by the deliveries made in a window (``split``) it says what
each delivery costs, process by process (issue 10 asks the report to show it).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Sequence

from bench.kit.procs import Sampler
from bench.kit.stats import WARMUP, steady_window

#: Clock ticks per second, the unit of ``/proc/<pid>/stat``'s CPU times.
TICKS = os.sysconf("SC_CLK_TCK")

#: The roles, in the order the report lists them.
ROLES = ("worker", "postgresql", "rabbitmq", "receiver", "web", "clock", "bench", "other")

#: The roles the report gives a column each; the rest are summed.
MAIN_ROLES = ("worker", "postgresql", "rabbitmq", "receiver")


def role_of(name: str, cmdline: Sequence[str]) -> str:
    """The role of one process on the benchmark's machine, from its name and command line."""
    command = " ".join(cmdline)
    if name.startswith("postgres") or command.startswith("postgres:"):
        return "postgresql"
    if name in ("beam.smp", "erl_child_setup", "epmd", "inet_gethost") or "rabbitmq" in command:
        return "rabbitmq"
    if "webhooks.worker" in command or "bench.peers." in command:
        return "worker"  # the service's workers, or a contender's (dramatiq, Celery, the floors)
    if "webhooks.clock" in command:
        return "clock"
    if "gunicorn" in command:
        return "web"
    if "bench.kit.receiver" in command:
        return "receiver"
    if "bench" in command:
        return "bench"  # the harness and its load generators
    return "other"


class CpuSampler(Sampler):
    """Samples every process's CPU time every ``interval`` seconds, in a thread, while in a ``with``."""

    def __init__(self, interval: float = 0.25) -> None:
        self.interval = interval
        #: (wall-clock time, {role: CPU seconds used since the sample before}) per sample.
        self.samples: list[tuple[float, dict[str, float]]] = []
        self._seen: dict[tuple[int, float], tuple[float, str]] = {}

    def sample(self) -> None:
        import psutil  # the benchmark's own virtualenv has it; the service's need not

        now, used = time.time(), dict.fromkeys(ROLES, 0.0)
        current: dict[tuple[int, float], tuple[float, str]] = {}
        for proc in psutil.process_iter(["name", "cmdline", "create_time", "cpu_times"]):
            info = proc.info
            if info["cpu_times"] is None or info["create_time"] is None:
                continue
            key = (proc.pid, info["create_time"])
            total = info["cpu_times"].user + info["cpu_times"].system
            before = self._seen.get(key)
            role = before[1] if before else role_of(info["name"] or "", info["cmdline"] or ())
            current[key] = (total, role)
            if before is not None:
                used[role] += max(total - before[0], 0.0)
        if self._seen:
            self.samples.append((now, used))
        self._seen = current


def split(samples: Sequence[tuple[float, dict[str, float]]], start: float, end: float, deliveries: int,
          cores: int) -> dict[str, Any]:
    """CPU milliseconds per delivery by role within ``[start, end]`` (wall-clock), and how many of the
    machine's ``cores`` were busy on average. A sample covers the time since the one before it; one
    that straddles an edge of the window counts in proportion."""
    used = dict.fromkeys(ROLES, 0.0)
    for (before, _), (at, by_role) in zip(samples, samples[1:]):
        overlap = min(at, end) - max(before, start)
        if overlap > 0:
            share = overlap / (at - before)
            for role, seconds in by_role.items():
                used[role] += seconds * share
    seconds = max(end - start, 1e-9)
    per = {role: 1000.0 * cpu / deliveries for role, cpu in used.items()} if deliveries else {}
    return {"ms_per_delivery": per, "total_ms": sum(per.values()), "busy_cores": sum(used.values()) / seconds,
            "cores": cores, "deliveries": deliveries, "seconds": end - start}


def steady_split(samples: Sequence[tuple[float, dict[str, float]]], arrivals: Sequence[float], cores: int,
                 warmup: float = WARMUP) -> dict[str, Any]:
    """``split`` over the window ``stats.steady_rate`` measures: the arrivals after the first ``warmup`` share."""
    steady = steady_window(arrivals, warmup)
    if len(steady) < 2:
        return {}
    return split(samples, steady[0], steady[-1], len(steady) - 1, cores)


def describe(cpu: dict[str, Any]) -> str:
    """One sentence for the report: the roles that used CPU, and how busy the machine was."""
    per = cpu["ms_per_delivery"]
    parts = [f"{role} {per[role]:.3f}" for role in ROLES if per.get(role, 0.0) >= 0.0005]
    return (f"CPU per delivery (ms): {', '.join(parts)}; {cpu['total_ms']:.3f} in all; "
            f"{cpu['busy_cores']:.2f} of {cpu['cores']} cores busy")


def process_cpu_seconds(pid: int, system_only: bool = False, children: bool = False) -> float:
    """User and system CPU time of one process so far (0 if it is gone): its system time only, or with
    ``children`` that of its reaped children too."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    kinds = (12,) if system_only else (11, 12, 13, 14) if children else (11, 12)
    return sum(int(fields[kind]) for kind in kinds) / TICKS
