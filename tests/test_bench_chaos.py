"""``python bench/run.py chaos`` runs on a RabbitMQ node of its own: a one-node ``Cluster``, never the machine's broker.

Booting the node takes most of a minute, so these tests check the pieces (the one-node cluster's
ports and URL, the worker the fault schedule kills and replaces, the source naming no shared
broker); CI runs the drill itself (``bench/run.py chaos --quick``).
"""

from __future__ import annotations

import ast
import pathlib
import socket
import sys
from dataclasses import dataclass, field

from bench.drills.chaos import kill_a_worker
from bench.kit.cluster import Cluster, free_base_port
from bench.kit.procs import PROCS, Child

CHAOS = pathlib.Path(__file__).resolve().parents[1] / "bench" / "drills" / "chaos.py"


def test_a_one_node_cluster_has_one_node_on_its_own_ports(tmp_path: pathlib.Path) -> None:
    base = free_base_port(nodes=1)
    cluster = Cluster(tmp_path, base, name="chaos-test", nodes=1)

    assert [node.name for node in cluster.nodes] == ["chaos-test-1@localhost"]
    assert cluster.amqp_url == f"amqp://guest:guest@127.0.0.1:{base}/%2F"
    assert 5672 not in (base, base + 20000, cluster.epmd_port)
    for port in (base, base + 20000, cluster.epmd_port):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", port))


def test_chaos_names_neither_the_shared_broker_nor_a_bare_rabbitmqctl() -> None:
    tree = ast.parse(CHAOS.read_text())
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    strings = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}

    assert not {"AMQP_URL", "Settings", "amqp_connection"} & names
    assert "rabbitmqctl" not in strings  # the node's own CLI goes through Cluster.ctl (-n its node)
    assert not any("5672" in text for text in strings)


@dataclass
class FakeStack:
    """The part of ``ServiceStack`` the fault schedule uses: its workers, and starting more (never the clock: the
    drill restarts workers only)."""

    workers: list[Child] = field(default_factory=list)
    started: int = 0

    def start_workers(self, count: int, clock: bool = True) -> list[Child]:
        assert not clock or not self.workers, "the fault schedule starts the clock again"
        new = [PROCS.start(f"chaos-test-worker-{self.started + i}", [sys.executable, "-c", "import time; time.sleep(60)"])
               for i in range(count)]
        self.started += count
        self.workers += new
        return new


def test_a_killed_worker_is_replaced_by_a_new_one() -> None:
    stack = FakeStack()
    stack.start_workers(2)
    before = list(stack.workers)
    try:
        kill_a_worker(stack)  # type: ignore[arg-type]

        killed = [child for child in before if child not in stack.workers]
        assert len(killed) == 1 and not killed[0].alive()
        assert killed[0].popen.returncode == -9
        assert len(stack.workers) == 2 and all(child.alive() for child in stack.workers)
    finally:
        for child in stack.workers:
            PROCS.stop(child, grace=1.0)
