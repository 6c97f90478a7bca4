"""The local services every benchmark uses: their URLs, a free loopback port, PostgreSQL admin statements.

Only the standard library and psycopg2, so it imports both from the service's virtualenv
(``bench/core.py``, ``bench/ingest_load.py``) and from the benchmark's own (``bench/harness.py``).
"""

from __future__ import annotations

import random
import socket

import psycopg2

AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"

#: Admin connection used to create and drop the benchmarks' PostgreSQL databases.
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


#: Ports handed out below the kernel's ephemeral range (``net.ipv4.ip_local_port_range``,
#: 32768-60999 by default): a port from that range, free when picked, can be taken by one
#: of the thousands of outgoing connections a worker opens before the server binds it.
PORT_RANGE = (20000, 32000)


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
    connection = psycopg2.connect(PG_ADMIN)
    connection.autocommit = True
    try:
        connection.cursor().execute(sql)
    finally:
        connection.close()
