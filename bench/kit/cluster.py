"""A throwaway RabbitMQ cluster on loopback, beside (never instead of) the machine's broker: ``Cluster`` for the
drills and tests, ``python bench/run.py cluster start|url|status|leader QUEUE|kill N|restart N|stop`` by hand
(``docs/reliability.md``).

Each node has its own node name, AMQP port (``--base-port``, + 1, + 2), Erlang distribution port (+ 20000), files
under one directory (``--dir``) with the cluster's own Erlang cookie (``HOME``), and an epmd of their own (base -
1300): the Debian package's ``/etc/rabbitmq`` files pin port 5672 and name the machine's node, so every node gets
its own of both, and before signalling a process the script checks in ``/proc`` that it runs one of its nodes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bench.kit.procs import Deadline, port_open

#: Where RabbitMQ's own scripts live on Debian; elsewhere, wherever ``rabbitmq-server`` is.
RABBITMQ_BIN = Path("/usr/lib/rabbitmq/bin")

#: Nodes in the cluster: three, the smallest cluster that survives the loss of one node.
NODES = 3

#: Default first AMQP port (nodes use base, base + 1, base + 2).
BASE_PORT = 5681

#: Seconds a node may take to boot (three boot at once on a small machine).
BOOT_SECONDS = 90.0

#: How long a quorum queue's dead-letter worker waits for the target queue to confirm a
#: dead-lettered message before it sends it again (ms). RabbitMQ's default is 180,000:
#: when the target queue's leader dies, the messages it had not confirmed (every retry
#: leaving a waiting tier at that moment) wait three minutes. Set in ``advanced.config``
#: only (there is no ``rabbitmq.conf`` key); docs/operating.md recommends the same in production.
DLX_CONFIRM_TIMEOUT_MS = 5000


def rabbitmq_bin() -> Path:
    if (RABBITMQ_BIN / "rabbitmq-server").exists():
        return RABBITMQ_BIN
    found = shutil.which("rabbitmq-server")
    if found is None:
        raise SystemExit("RabbitMQ is not installed (no rabbitmq-server): apt-get install rabbitmq-server")
    return Path(found).resolve().parent


def free_base_port(first: int = 10000, nodes: int = NODES) -> int:
    """A base port whose ``nodes`` AMQP ports, distribution ports and epmd port are all free now, each below the
    kernel's ephemeral range (32768 unless configured): a client connection could otherwise take a killed node's
    port before the node is restarted."""
    try:
        ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral = 32768
    last = ephemeral - 20000 - nodes
    for base in random.sample(range(first, last), min(200, last - first)):
        ports = [base + n for n in range(nodes)] + [base + 20000 + n for n in range(nodes)] + [base - 1300]
        try:
            for port in ports:
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free block of ports for a cluster")


@dataclass(frozen=True)
class Node:
    """One node: its Erlang name, ports and directory."""

    name: str
    amqp_port: int
    dist_port: int
    home: Path

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.amqp_port}/%2F"

    @property
    def pid_file(self) -> Path:
        return self.home / "pid"


class Cluster:
    """Local RabbitMQ nodes (three, or one for a broker of a run's own) sharing a cookie and an epmd of their own."""

    def __init__(self, directory: Path | None = None, base_port: int = BASE_PORT, name: str = "webhooks-cluster",
                 dlx_confirm_timeout_ms: int | None = DLX_CONFIRM_TIMEOUT_MS, nodes: int = NODES) -> None:
        self.directory = (directory or Path(tempfile.gettempdir()) / f"webhooks-cluster-{os.getuid()}").resolve()
        #: None keeps RabbitMQ's default (to measure what it does).
        self.dlx_confirm_timeout_ms = dlx_confirm_timeout_ms
        self.epmd_port = base_port - 1300
        self.nodes = [
            Node(f"{name}-{n}@localhost", base_port + n - 1, base_port + n - 1 + 20000, self.directory / f"node{n}")
            for n in range(1, nodes + 1)
        ]
        self.bin = rabbitmq_bin()

    @property
    def amqp_url(self) -> str:
        """``AMQP_URL`` for the service: every node, comma-separated."""
        return ",".join(node.url for node in self.nodes)

    def node(self, number: int) -> Node:
        if not 1 <= number <= len(self.nodes):
            raise SystemExit(f"no node {number}: nodes are 1 to {len(self.nodes)}")
        return self.nodes[number - 1]

    def node_named(self, name: str) -> Node:
        return next(node for node in self.nodes if node.name == name)

    def _env(self, node: Node) -> dict[str, str]:
        """The environment of this node's server and of CLI commands aimed at the cluster."""
        env = {key: value for key, value in os.environ.items() if not key.startswith(("RABBITMQ_", "ERL_"))}
        env.update({
            "HOME": str(self.directory),  # the cluster's own .erlang.cookie
            "ERL_EPMD_PORT": str(self.epmd_port),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODENAME": node.name,
            "RABBITMQ_NODE_PORT": str(node.amqp_port),
            "RABBITMQ_DIST_PORT": str(node.dist_port),
            "RABBITMQ_CONFIG_FILE": str(node.home / "rabbitmq.conf"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(node.home / "advanced.config"),
            "RABBITMQ_CONF_ENV_FILE": str(node.home / "rabbitmq-env.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(node.home / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(node.home / "data"),
            "RABBITMQ_MNESIA_DIR": str(node.home / "data" / node.name),
            "RABBITMQ_LOG_BASE": str(node.home / "log"),
            "RABBITMQ_PID_FILE": str(node.pid_file),
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
        })
        return env

    def _write_files(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        cookie = self.directory / ".erlang.cookie"
        if not cookie.exists():
            cookie.write_text(secrets.token_hex(20).upper())
            cookie.chmod(0o400)
        for node in self.nodes:
            for sub in ("data", "log"):
                (node.home / sub).mkdir(parents=True, exist_ok=True)
            (node.home / "rabbitmq.conf").write_text(
                f"listeners.tcp.local = 127.0.0.1:{node.amqp_port}\n"
                "loopback_users.guest = true\n"
                # The nodes share a small machine with other services: flow control stays far
                # from what a test run uses, and from the machine's own broker's share.
                "vm_memory_high_watermark.absolute = 1GB\n"
                "disk_free_limit.absolute = 100MB\n"
                # Three nodes: the side of a partition without a majority pauses itself.
                "cluster_partition_handling = pause_minority\n"
                "log.console = false\n"
                "log.file.level = info\n"
            )
            (node.home / "rabbitmq-env.conf").write_text("# this node's settings come from the environment\n")
            rabbit = ([] if self.dlx_confirm_timeout_ms is None
                      else [f"{{dead_letter_worker_publisher_confirm_timeout, {self.dlx_confirm_timeout_ms}}}"])
            (node.home / "advanced.config").write_text(f"[{{rabbit, [{', '.join(rabbit)}]}}].\n")
            (node.home / "enabled_plugins").write_text("[].\n")

    def ctl(self, node: Node, *args: str, timeout: float = 120.0, tool: str = "rabbitmqctl") -> str:
        """Run a RabbitMQ CLI command against ``node``; raise with its output if it fails."""
        result = subprocess.run(
            [str(self.bin / tool), "-n", node.name, *args],
            env=self._env(node), capture_output=True, text=True, timeout=timeout,
        )
        if result.returncode != 0:
            raise RuntimeError(f"{tool} -n {node.name} {' '.join(args)}: {result.stdout}{result.stderr}".strip())
        return result.stdout

    def _boot(self, node: Node) -> None:
        """Start ``node`` in a session of its own and wait until it serves AMQP."""
        node.pid_file.unlink(missing_ok=True)
        log = open(node.home / "log" / "server.out", "ab")
        subprocess.Popen(
            [str(self.bin / "rabbitmq-server")], env=self._env(node), cwd=node.home,
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        log.close()
        self.ctl(node, "wait", str(node.pid_file), "--timeout", str(int(BOOT_SECONDS)), timeout=BOOT_SECONDS + 30)
        Deadline(BOOT_SECONDS, f"{node.name} listening on {node.amqp_port}").wait(lambda: port_open(node.amqp_port))

    def start(self) -> str:
        """Start the nodes, join the others to node 1; return the AMQP_URL list."""
        busy = [node.amqp_port for node in self.nodes if port_open(node.amqp_port)]
        if busy:
            raise SystemExit(f"port(s) {busy} already in use: is a cluster running? (`stop` it, or --base-port)")
        self._write_files()
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            list(pool.map(self._boot, self.nodes))
        first = self.nodes[0]
        for node in self.nodes[1:]:
            self.ctl(node, "stop_app")
            self.ctl(node, "join_cluster", first.name)
            self.ctl(node, "start_app")
        return self.amqp_url

    def pid(self, node: Node) -> int | None:
        """The OS process of ``node`` if it runs, after checking it is that node (never another broker)."""
        try:
            pid = int(node.pid_file.read_text().strip())
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except (OSError, ValueError):
            return None
        return pid if f"RABBITMQ_NODENAME={node.name}".encode() in environ else None

    def running(self, node: Node) -> bool:
        return self.pid(node) is not None

    def kill(self, node: Node) -> None:
        """``kill -9`` the node's Erlang VM, and wait until its AMQP port is closed."""
        pid = self.pid(node)
        if pid is None:
            raise RuntimeError(f"{node.name} is not running")
        os.kill(pid, signal.SIGKILL)
        Deadline(30, f"{node.name} (pid {pid}) dying").wait(
            lambda: not (Path(f"/proc/{pid}").exists() or port_open(node.amqp_port)), 0.05)

    def restart(self, node: Node) -> None:
        """Start a stopped or killed node again; it rejoins the cluster from its own data."""
        if self.running(node):
            raise RuntimeError(f"{node.name} is already running")
        self._boot(node)

    def leader(self, queue: str, vhost: str = "/") -> tuple[str, list[str]]:
        """(leader node name, member node names) of a quorum queue, asked of each running node in turn (one that
        has just restarted may not list the queue yet)."""
        asked = False
        for node in self.nodes:
            if not self.running(node):
                continue
            asked = True
            out = self.ctl(node, "list_queues", "-p", vhost, "-q", "name", "leader", "members",
                           "--formatter", "json")
            for row in json.loads(out):
                if row["name"] == queue:
                    return str(row["leader"]), [str(member) for member in row["members"]]
        if not asked:
            raise RuntimeError("no node of the cluster is running")
        raise KeyError(f"no running node lists queue {queue!r} in vhost {vhost!r}")

    def status(self) -> str:
        lines = [f"{node.name}: {'running' if self.running(node) else 'stopped'} on {node.amqp_port}"
                 for node in self.nodes]
        live = next((node for node in self.nodes if self.running(node)), None)
        if live is not None:
            lines.append(self.ctl(live, "cluster_status", "-q").strip())
        return "\n".join(lines)

    def stop(self) -> None:
        """Kill every node, stop the cluster's epmd and remove the whole directory."""
        for node in self.nodes:
            if self.running(node):
                self.kill(node)
        subprocess.run(["epmd", "-port", str(self.epmd_port), "-kill"], capture_output=True, timeout=30,
                       env={**os.environ, "ERL_EPMD_PORT": str(self.epmd_port)})
        shutil.rmtree(self.directory, ignore_errors=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", type=Path, default=None, help="where the nodes keep their files")
    parser.add_argument("--base-port", type=int, default=BASE_PORT, help="AMQP port of node 1 (default %(default)s)")
    parser.add_argument("command", choices=("start", "url", "status", "leader", "kill", "restart", "stop"))
    parser.add_argument("target", nargs="?", help="leader: the queue; kill, restart: the node (1, 2 or 3)")


def main(args: argparse.Namespace) -> int:
    """``python bench/run.py cluster COMMAND``: start, inspect, kill, restart or stop the cluster."""
    cluster = Cluster(args.dir, args.base_port)
    if args.command in ("leader", "kill", "restart") and args.target is None:
        raise SystemExit(f"cluster {args.command}: name the {'queue' if args.command == 'leader' else 'node'}")
    if args.command == "start":
        started = time.monotonic()
        url = cluster.start()
        print(f"cluster of {NODES} nodes up in {time.monotonic() - started:.0f} s; stop it with: "
              f"python bench/run.py cluster stop", file=sys.stderr)
        print(url)
    elif args.command == "url":
        print(cluster.amqp_url)
    elif args.command == "status":
        print(cluster.status())
    elif args.command == "leader":
        leader_name, members = cluster.leader(args.target)
        print(f"{leader_name} (members: {', '.join(members)})")
    elif args.command in ("kill", "restart"):
        getattr(cluster, args.command)(cluster.node(int(args.target)))
    else:
        cluster.stop()
    return 0
