"""The local services every benchmark uses: their URLs, a free loopback port, PostgreSQL admin statements.

Only the standard library and psycopg2, so it imports both from the service's virtualenv
(``bench/core.py``, ``bench/ingest_load.py``) and from the benchmark's own (``bench/harness.py``).
"""

from __future__ import annotations

import socket

import psycopg2

AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"

#: Admin connection used to create and drop the benchmarks' PostgreSQL databases.
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


def free_port() -> int:
    """A loopback TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def pg_admin(sql: str) -> None:
    """Run one statement on the ``postgres`` database outside a transaction (CREATE/DROP DATABASE)."""
    connection = psycopg2.connect(PG_ADMIN)
    connection.autocommit = True
    try:
        connection.cursor().execute(sql)
    finally:
        connection.close()
