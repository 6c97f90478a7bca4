"""What the fault drills share: a RabbitMQ of the drill's own, the service on it the Procfile's way, waiting for
the deliveries to settle, the lines printed before the figures, what is checked once the load is over (settled,
attempt logs, lost and duplicates) and the verdict. Only the standard library, pika and psycopg2 below it, so a
drill runs in the service's virtualenv."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterable

from bench.kit.cluster import NODES, Cluster, free_base_port
from bench.kit.procs import CLEANUP, Deadline, log
from bench.kit.services import Sql, machine_line
from bench.kit.stack import ServiceStack

#: The service's settings in every drill: short timeouts, so that a fault plays out within the run.
SETTINGS = {"DELIVERY_TIMEOUT": "5", "RELAY_GRACE": "3", "LOG_LEVEL": "INFO"}


def own_broker(drill: str, nodes: int = NODES, **options: Any) -> Cluster:
    """A RabbitMQ of the drill's own (``nodes`` nodes on free ports), stopped and removed at exit; not started."""
    cluster = Cluster(Path(tempfile.mkdtemp(prefix=f"{drill}-broker-")), free_base_port(nodes=nodes),
                      name=f"{drill}-{os.getpid()}", nodes=nodes, **options)
    CLEANUP.add("stop the broker", cluster.stop)
    return cluster


def service(drill: str, cluster: Cluster, env: dict[str, str]) -> ServiceStack:
    """The service on ``cluster`` (``SETTINGS`` and ``env``), on a fresh database; stopped at exit."""
    stack = ServiceStack(drill, {"AMQP_URL": cluster.amqp_url, **SETTINGS, **env})
    CLEANUP.add("stop the service", stack.close)
    return stack


def start(stack: ServiceStack) -> None:
    """The Procfile's processes: the web (2 processes), 2 delivery workers and the clock."""
    stack.start_web()
    stack.start_workers(2)


def settle(seconds: float, settled: Callable[[], bool], every: float = 1.0) -> None:
    """Wait until ``settled()`` holds, or ``seconds`` have passed (the checks then say what is missing)."""
    log(f"load done; waiting up to {seconds:.0f} s for deliveries to settle")
    deadline = Deadline(seconds, "settling")
    while deadline.left() > 0 and not settled():
        time.sleep(every)


def heading(drill: str) -> None:
    """The machine and the command (``python bench/run.py DRILL …``), printed before a drill's figures."""
    print(machine_line())
    print(f"command: python bench/run.py {drill} {' '.join(sys.argv[2:])}".rstrip())


#: Delivery statuses with an attempt still to come.
UNFINISHED = ("pending", "retrying")


def unfinished_deliveries(sql: Sql) -> int:
    """Deliveries still waiting for an attempt (the run has not settled while any is)."""
    return int(sql.value("SELECT count(*) FROM delivery WHERE status IN %s", (UNFINISHED,)))


def missing_attempt_logs(sql: Sql) -> int:
    """Deliveries marked delivered without the successful attempt in the attempt log (must be 0)."""
    return int(sql.value(
        "SELECT count(*) FROM delivery d WHERE d.status = 'delivered' AND NOT EXISTS "
        "(SELECT 1 FROM attempt a WHERE a.delivery_id = d.id AND a.outcome = 'delivered')"
    ))


def arrivals(accepted: Iterable[str], received: Iterable[str]) -> dict[str, float]:
    """Accepted event ids against the ``webhook-id`` of every request a receiver got (one endpoint)."""
    wanted = set(accepted)
    counts = Counter(received)
    total = sum(counts.values())
    duplicates = total - len(counts)
    return {
        "accepted": len(wanted),
        "delivered at least once": len(wanted & counts.keys()),
        "lost": len(wanted - counts.keys()),
        "duplicates": duplicates,
        "duplicate rate": duplicates / max(1, total),
    }


def verdict(run: str, checks: dict[str, bool]) -> int:
    """Print a PASS or FAIL line per check and a summary line; the exit status (1 if any failed)."""
    for name, ok in checks.items():
        print(f"{'PASS' if ok else 'FAIL'}: {name}")
    failed = sum(not ok for ok in checks.values())
    print(f"{run}: {len(checks) - failed} passed, {failed} failed")
    return 1 if failed else 0
