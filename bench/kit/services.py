"""The machine's RabbitMQ and PostgreSQL as the benchmarks use them, and what the machine is. Only the standard
library, pika and psycopg2, so it imports from the service's virtualenv too (the drills run there)."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import random
import socket
import subprocess
import time
from contextlib import closing
from pathlib import Path
from typing import Any, Iterable

import pika
import pika.exceptions
import psycopg2

from bench.kit.procs import ROOT

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


def pg_admin(sql: str) -> None:
    """Run one statement on the ``postgres`` database outside a transaction (CREATE/DROP DATABASE)."""
    with closing(psycopg2.connect(PG_ADMIN)) as connection:
        connection.autocommit = True
        connection.cursor().execute(sql)


def fresh_database(name: str) -> str:
    """A new, empty database ``name`` (an old one of that name is dropped first); returns its URL."""
    pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    pg_admin(f'CREATE DATABASE "{name}"')
    return f"{PG_ADMIN.rsplit('/', 1)[0]}/{name}"


def drop_database(name: str) -> None:
    pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


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


def postgres_version() -> str:
    with closing(Sql(PG_ADMIN)) as admin:
        return admin.value("SHOW server_version")


def amqp_connection(url: str = AMQP_URL) -> pika.BlockingConnection:
    """A connection to the broker of ``url`` (``AMQP_URL``'s comma-separated nodes: the first that answers)."""
    return pika.BlockingConnection([pika.URLParameters(node) for node in url.split(",")])


def rabbitmq_version() -> str:
    with amqp_connection() as connection:
        version = connection._impl.server_properties.get("version", b"?")  # noqa: SLF001 - no public accessor
    return version.decode() if isinstance(version, bytes) else str(version)


def queue_depth(name: str, url: str = AMQP_URL) -> int:
    """Messages in queue ``name`` on the broker of ``url``."""
    with amqp_connection(url) as connection:
        return connection.channel().queue_declare(name, passive=True).method.message_count


def _rabbitmqctl_names(kind: str) -> list[str]:
    """The names ``rabbitmqctl list_<kind>s`` lists (none when it cannot be run)."""
    try:
        out = subprocess.run(["rabbitmqctl", "-q", f"list_{kind}s", "name"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    names = [line.strip() for line in out.stdout.splitlines()] if out.returncode == 0 else []
    return [name for name in names if name and name != "name"]


def delete_broker_objects(prefix: str, queues: Iterable[str] = (), exchanges: Iterable[str] = ()) -> None:
    """Delete the named queues and exchanges and every one whose name starts with ``prefix``."""
    named = {kind: sorted({*given, *(name for name in _rabbitmqctl_names(kind) if name.startswith(prefix))})
             for kind, given in (("queue", queues), ("exchange", exchanges))}
    with amqp_connection() as connection:
        for kind, names in named.items():
            for name in names:
                channel = connection.channel()
                try:
                    getattr(channel, f"{kind}_delete")(name)
                    channel.close()
                except pika.exceptions.ChannelClosedByBroker:
                    pass


def machine_line() -> str:
    """One line naming the date and the machine, as the fault runs and the probes print it first."""
    return (f"date: {time.strftime('%Y-%m-%d')}  machine: {platform.machine()}, {os.cpu_count()} cores, "
            f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') // 2**30} GiB, "
            f"Python {platform.python_version()}")


def machine() -> dict[str, Any]:
    """The machine a full run ran on: CPU model, cores, memory, kernel, distribution, load at start."""
    def first(path: str, key: str) -> str | None:
        return next((line.split(":", 1)[1].strip() for line in Path(path).read_text().splitlines()
                     if line.startswith(key)), None)

    try:
        distro = "Debian " + Path("/etc/debian_version").read_text().strip()
    except OSError:
        distro = ""
    memory_gib = int((first("/proc/meminfo", "MemTotal:") or "0 kB").split()[0]) / 2**20
    return {"cores": os.cpu_count(), "memory_gib": memory_gib, "cpu": first("/proc/cpuinfo", "model name") or "?",
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
    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10)

    try:
        head, dirty = git("rev-parse", "--short", "HEAD"), git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.TimeoutExpired):
        return None
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "") if head.returncode == 0 else None
