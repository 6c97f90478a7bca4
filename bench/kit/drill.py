"""What the fault drills share: a RabbitMQ of the drill's own, the service on it the Procfile's way, waiting for
the deliveries to settle, the lines printed before the figures. Only the standard library, pika and psycopg2
below it, so a drill runs in the service's virtualenv."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from bench.kit.cluster import NODES, Cluster, free_base_port
from bench.kit.procs import CLEANUP, Deadline, log
from bench.kit.services import machine_line
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
    stack.start_clock()


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
