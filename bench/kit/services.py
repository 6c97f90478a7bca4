"""The machine's RabbitMQ and PostgreSQL as the benchmarks use them: their URLs, a free loopback port,
fresh databases, queue depths, deleting what a run declared, versions, and what the machine is.

Only the standard library, pika and psycopg2, so it imports from the service's virtualenv too
(the fault drills of ``bench/drills/`` run there).
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import random
import shutil
import socket
import subprocess
import time
from typing import Any, Iterable

import pika
import pika.exceptions
import psycopg2

AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"

#: Admin connection used to create and drop the benchmarks' PostgreSQL databases.
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"

#: Ports handed out below the kernel's ephemeral range (``net.ipv4.ip_local_port_range``,
#: 32768-60999 by default): a port from that range, free when picked, can be taken by one
#: of the thousands of outgoing connections a worker opens before the server binds it.
PORT_RANGE = (20000, 32000)

#: The packages whose versions a full run's report states.
REPORTED_PACKAGES = ("dramatiq", "celery", "kombu", "amqp", "pika", "httpx", "psutil", "gunicorn", "Flask", "peewee",
                     "psycopg2-binary", "aiohttp", "matplotlib")


def free_port() -> int:
    """A loopback TCP port nothing listens on right now, outside the ephemeral range."""
    for _ in range(200):
        port = random.randint(*PORT_RANGE)
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {PORT_RANGE}")


# -- PostgreSQL ----------------------------------------------------------------------------------


def pg_admin(sql: str) -> None:
    """Run one statement on the ``postgres`` database outside a transaction (CREATE/DROP DATABASE)."""
    connection = psycopg2.connect(PG_ADMIN)
    connection.autocommit = True
    try:
        connection.cursor().execute(sql)
    finally:
        connection.close()


def fresh_database(name: str) -> str:
    """A new, empty database ``name`` (an old one of that name is dropped first); returns its URL."""
    pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    pg_admin(f'CREATE DATABASE "{name}"')
    return f"{PG_ADMIN.rsplit('/', 1)[0]}/{name}"


def drop_database(name: str) -> None:
    pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


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


# -- RabbitMQ ------------------------------------------------------------------------------------


def amqp_connection(url: str = AMQP_URL) -> pika.BlockingConnection:
    """A connection to the broker of ``url`` (``AMQP_URL``'s comma-separated nodes: the first that answers)."""
    return pika.BlockingConnection([pika.URLParameters(node) for node in url.split(",")])


def rabbitmq_version() -> str:
    connection = amqp_connection()
    try:
        version = connection._impl.server_properties.get("version", b"?")  # noqa: SLF001 - no public accessor
        return version.decode() if isinstance(version, bytes) else str(version)
    finally:
        connection.close()


def queue_depth(name: str, url: str = AMQP_URL) -> int:
    """Messages in queue ``name`` on the broker of ``url``."""
    connection = amqp_connection(url)
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


# -- the machine ---------------------------------------------------------------------------------


def machine_line() -> str:
    """One line naming the date and the machine, as the fault runs and the probes print it first."""
    return (f"date: {time.strftime('%Y-%m-%d')}  machine: {platform.machine()}, {os.cpu_count()} cores, "
            f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') // 2**30} GiB, "
            f"Python {platform.python_version()}")


def machine() -> dict[str, Any]:
    """The machine a full run ran on: CPU model, cores, memory, kernel, distribution, load at start."""
    model = "?"
    with open("/proc/cpuinfo") as handle:
        for line in handle:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory_kib = 0
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("MemTotal:"):
                memory_kib = int(line.split()[1])
    distro = ""
    try:
        distro = "Debian " + open("/etc/debian_version").read().strip()
    except OSError:
        pass
    return {"cores": os.cpu_count(), "memory_gib": memory_kib / 2**20, "cpu": model,
            "kernel": platform.release(), "os": distro, "load_at_start": os.getloadavg()}


def versions(wrk_version: str) -> dict[str, str]:
    """Python's, RabbitMQ's, PostgreSQL's and every reported package's version, and wrk's as given."""
    found = {"python": platform.python_version()}
    for service, call in (("rabbitmq", rabbitmq_version), ("postgresql", postgres_version)):
        try:
            found[service] = call()
        except Exception as error:  # noqa: BLE001
            found[service] = f"unknown ({error})"
    for package in REPORTED_PACKAGES:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "not installed"
    found["wrk"] = wrk_version
    return found


def commit() -> str | None:
    """The checkout's commit (short), with ``+`` when it has uncommitted changes; None outside git."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if head.returncode != 0:
        return None
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")
