"""PostgreSQL server-side prepared statements, kept per connection (``PG_PREPARED_STATEMENTS``).

Planning a short statement can cost as much as running it; ``PREPARE`` once per
connection and ``EXECUTE`` afterwards saves that on the hot path of ``POST /v1/events``,
and on the worker's for its batches of a few rows (``small_batch_name``).
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import weakref
from typing import Any, Callable, TypeVar

import peewee

from webhooks.storage.db import database, is_postgres

log = logging.getLogger(__name__)

R = TypeVar("R")

#: Server-side prepared statements for the PostgreSQL fast path: planning the bump-and-
#: endpoints statement costs about as much as running it. ``PG_PREPARED_STATEMENTS=0``
#: turns them off (needed behind PgBouncer in transaction mode, which does not keep an
#: SQL-level PREPARE from one transaction to the next).
PREPARED_STATEMENTS = os.environ.get("PG_PREPARED_STATEMENTS", "1") != "0"

#: SQLSTATEs: a statement of that name exists already / does not exist (any more); a NULL in a NOT NULL column.
DUPLICATE_PREPARED_STATEMENT = "42P05"
INVALID_STATEMENT_NAME = "26000"
NOT_NULL_VIOLATION = "23502"


#: The worker's leases and records of up to this many deliveries run as prepared statements.
#: At low load a batch holds one delivery, and planning a one-row lease cost PostgreSQL
#: 0.37 ms against 0.1 ms to run it (``pg_stat_statements``, 200 events/s); prepared, it
#: took 0.14 ms in all, and a one-row advance 0.16 ms instead of 0.36. Not more: the
#: generic plan of an advance of 2 to 4 rows took 2.8 ms a run (against 0.5-0.7 planned
#: each time), and larger batches are few statements for many deliveries anyway.
SMALL_BATCH_ROWS = 1


def small_batch_name(kind: str, rows: int) -> str | None:
    """The name to prepare ``kind``'s statement of ``rows`` rows under, or None: not worth it here."""
    return f"{kind}_{rows}" if rows <= SMALL_BATCH_ROWS and is_postgres() else None


def _numbered(sql: str) -> str:
    """psycopg2's ``%s`` placeholders as PREPARE's ``$1``, ``$2``, …"""
    numbers = itertools.count(1)
    return re.sub(r"%s", lambda _match: f"${next(numbers)}", sql)


def pgcode(error: BaseException) -> str | None:
    """The SQLSTATE behind a (peewee-wrapped) psycopg2 error, if any."""
    for candidate in (error, error.__cause__, error.__context__, *getattr(error, "args", ())):
        code = getattr(candidate, "pgcode", None)
        if code:
            return str(code)
    return None


class PreparedStatements:
    """Which statements each PostgreSQL connection of this process has prepared.

    A statement is prepared only outside a transaction (a failed PREPARE inside one
    would abort it), on first use per connection; prepared statements live as long as
    their connection. If one has vanished (``DISCARD ALL``), ``vanished`` forgets the
    connection's set and the caller runs the statement again.
    """

    def __init__(self, enabled: bool = PREPARED_STATEMENTS) -> None:
        self.enabled = enabled
        self._ready: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()

    def has(self, name: str) -> bool:
        return self.enabled and name in self._ready.get(database.connection(), ())

    def prepare(self, name: str, sql: str) -> None:
        """Prepare ``sql`` as ``name`` on this thread's connection (no transaction may be open)."""
        if not self.enabled or self.has(name):
            return
        try:
            database.execute_sql(f"PREPARE {name} AS {_numbered(sql)}")
        except (peewee.OperationalError, peewee.InterfaceError):
            raise  # a dead connection: ``retrying`` reconnects
        except peewee.DatabaseError as error:
            if pgcode(error) != DUPLICATE_PREPARED_STATEMENT:
                log.warning("could not prepare %s (%s); running it unprepared", name, error)
                return
        self._ready.setdefault(database.connection(), set()).add(name)

    def sql_for(self, name: str, sql: str) -> str:
        """``EXECUTE name(%s, …)`` if this connection has ``name`` prepared, else ``sql`` itself."""
        if not self.has(name):
            return sql
        return f"EXECUTE {name}({', '.join(['%s'] * sql.count('%s'))})"

    def forget(self) -> None:
        self._ready.pop(database.connection(), None)

    def again_if_vanished(self, run: Callable[[bool], R]) -> R:
        """``run(True)``, with its prepared statements; if one of them has vanished (``DISCARD ALL``:
        the statement wrote nothing), ``run(False)`` once more, unprepared. The one retry of a
        vanished statement: the lease, the record and the ingest all go through it."""
        try:
            return run(True)
        except peewee.DatabaseError as error:
            if not self.vanished(error):
                raise
        return run(False)

    def vanished(self, error: BaseException) -> bool:
        """Did ``error`` come from a prepared statement that has vanished (``DISCARD ALL``)? If so,
        this connection's set is forgotten (prepared again on next use): the statement wrote
        nothing, so the caller may run it again."""
        if pgcode(error) != INVALID_STATEMENT_NAME:
            return False
        self.forget()
        return True
