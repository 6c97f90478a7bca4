"""Database connection: SQLite (WAL, busy timeout, BEGIN IMMEDIATE) or pooled PostgreSQL.

Models bind to the ``database`` proxy; each process initialises it from ``DATABASE_URL``
after it forks. ``write()`` wraps every multi-row write, and ``retrying()`` reruns an
operation once after the server dropped its connection (a PostgreSQL restart).
"""

from __future__ import annotations

import functools
import io
import logging
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar
from urllib.parse import parse_qs, urlparse

import peewee
from playhouse.pool import PooledPostgresqlDatabase

log = logging.getLogger(__name__)

#: Every model binds here; ``init_database`` points it at the real database.
database = peewee.DatabaseProxy()

#: How long SQLite waits for another writer before raising "database is locked" (ms).
SQLITE_BUSY_TIMEOUT_MS = 15_000

#: Upper bound of PostgreSQL connections per process (threads above this wait).
PG_MAX_CONNECTIONS = 32

#: Seconds a pooled PostgreSQL connection may sit idle and still be handed out unchecked.
#: After longer, ``SELECT 1`` proves it alive first (the server may have restarted meanwhile).
PG_RECHECK_IDLE_SECONDS = 1.0

T = TypeVar("T")


class PooledPostgres(PooledPostgresqlDatabase):
    """peewee's PostgreSQL pool, with fewer round trips to the server.

    - peewee proves every pooled connection alive with ``SELECT 1`` when it hands it out:
      one more statement for every request and every batch of the worker, as dear as the
      work itself at low load. Here only a connection idle for more than
      ``PG_RECHECK_IDLE_SECONDS`` is checked so; one back from use within that was alive a
      moment ago, and if the server went away in that moment, the first statement fails
      like any statement in flight would (``retrying`` reconnects; the API answers 503).
    - ``BEGIN`` (and ``defer``-red settings such as ``relaxed_commit``) are not sent on
      their own but in front of the transaction's first statement, in the same round trip;
      a transaction that runs no statement sends nothing at all.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._returned: dict[int, float] = {}
        self._pending = threading.local()
        super().__init__(*args, **kwargs)

    # -- the pool ---------------------------------------------------------------------------

    def _is_closed(self, conn: Any) -> bool:
        returned = self._returned.pop(self.conn_key(conn), None)
        if conn.closed:
            return True
        if returned is not None and time.monotonic() - returned < PG_RECHECK_IDLE_SECONDS:
            return not self._adapter.is_connection_reusable(conn)  # the transaction status only: no round trip
        return super()._is_closed(conn)

    def _close(self, conn: Any, close_conn: bool = False) -> None:
        if not close_conn:
            self._returned[self.conn_key(conn)] = time.monotonic()
        super()._close(conn, close_conn)

    def _close_raw(self, conn: Any) -> None:
        self._returned.pop(self.conn_key(conn), None)
        super()._close_raw(conn)

    # -- statements sent with the next one --------------------------------------------------

    def begin(self, isolation_level: Any = None) -> None:
        if isolation_level is not None or self._isolation_level is not None:
            super().begin(isolation_level)
            return
        self.connection()  # connected now, as a BEGIN sent at once would be (connecting later resets peewee's stack)
        self._pending.statements = ["BEGIN"]

    def defer(self, statement: str) -> None:
        """Send ``statement`` (no parameters) in front of the next one if the transaction has
        not reached the server yet, else now."""
        pending = getattr(self._pending, "statements", None)
        if pending:
            pending.append(statement)
        else:
            self.execute_sql(statement)

    def copy_in(self, sql: str, data: str) -> None:
        """Run ``sql`` (a ``COPY … FROM STDIN``) with ``data`` as its input, after the statements
        still waiting to be sent (the transaction's ``BEGIN``); errors raised as peewee's."""
        pending = self._take_pending()
        with peewee.__exception_wrapper__:
            cursor = self.cursor()
            if pending:
                cursor.execute("; ".join(pending))
            cursor.copy_expert(sql, io.StringIO(data))

    def _take_pending(self) -> list[str]:
        pending = getattr(self._pending, "statements", None) or []
        self._pending.statements = None
        return pending

    def _execute_cursor(self, sql: str, params: Any, **cursor_options: Any) -> Any:
        pending = self._take_pending()
        if pending:
            sql = "; ".join([*pending, sql])
        return super()._execute_cursor(sql, params, **cursor_options)

    def commit(self) -> None:
        if self._take_pending():
            return  # the transaction never reached the server: nothing to commit
        super().commit()

    def rollback(self) -> None:
        if self._take_pending():
            return
        super().rollback()


def open_database(url: str) -> peewee.Database:
    """A peewee database for ``sqlite:///path`` or ``postgresql://user@host:port/name``."""
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        path = parsed.path[1:] if parsed.path.startswith("/") else parsed.path
        if url.startswith("sqlite:////"):
            path = parsed.path  # four slashes: an absolute path
        return peewee.SqliteDatabase(
            path or ":memory:",
            pragmas={
                "journal_mode": "wal",
                "busy_timeout": SQLITE_BUSY_TIMEOUT_MS,
                "foreign_keys": 1,
                "synchronous": "normal",
            },
            # Writers take the lock at BEGIN, so two writers queue on busy_timeout
            # instead of deadlocking when both upgrade from a read lock.
            lock_type="IMMEDIATE",
            check_same_thread=False,
        )
    if parsed.scheme in ("postgres", "postgresql"):
        options = {key: values[-1] for key, values in parse_qs(parsed.query).items()}
        return PooledPostgres(
            (parsed.path or "/")[1:] or "postgres",
            user=parsed.username,
            password=parsed.password,
            host=parsed.hostname,
            port=parsed.port or 5432,
            max_connections=PG_MAX_CONNECTIONS,
            stale_timeout=300,
            timeout=10,
            **options,
        )
    raise ValueError(f"unsupported DATABASE_URL scheme {parsed.scheme!r}: use sqlite or postgresql")


def init_database(url: str) -> peewee.Database:
    """Point the proxy at ``url`` (a no-op if it already points there)."""
    if database.obj is not None:
        if getattr(database.obj, "webhooks_url", None) == url:
            return database.obj
        if not database.is_closed():
            database.close()
    db = open_database(url)
    db.webhooks_url = url  # type: ignore[attr-defined]
    database.initialize(db)
    return db


def is_postgres() -> bool:
    """True when the proxy points at PostgreSQL."""
    return isinstance(database.obj, peewee.PostgresqlDatabase)


def write() -> Any:
    """A write transaction (``BEGIN IMMEDIATE`` on SQLite, where it matters)."""
    return database.atomic()


def _is_disconnect(error: Exception) -> bool:
    if isinstance(error, peewee.InterfaceError):
        return True
    text = str(error).lower()
    return any(
        phrase in text
        for phrase in ("server closed the connection", "terminating connection", "connection already closed",
                       "could not connect", "connection refused", "ssl connection has been closed")
    )


def retrying(fn: Callable[..., T]) -> Callable[..., T]:
    """Run ``fn``; if the database connection turned out dead, close it and run once more."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except (peewee.OperationalError, peewee.InterfaceError) as error:
            if not _is_disconnect(error) or database.in_transaction():
                raise
            log.warning("database connection lost (%s); reconnecting and retrying once", error)
            reset_connection()
            return fn(*args, **kwargs)

    return wrapper


def reset_connection() -> None:
    """Throw away this thread's connection (it is dead) so the next use opens a fresh one."""
    db = database.obj
    try:
        if isinstance(db, PooledPostgresqlDatabase):
            if not db.is_closed():
                db.manual_close()
            db.close_idle()  # idle pooled connections predate the restart: dead too
        elif not db.is_closed():
            db.close()
    except Exception:  # noqa: BLE001 - the connection is broken; closing it may fail too
        log.debug("ignoring error while closing a dead connection", exc_info=True)
        db._state.reset()


@contextmanager
def connection() -> Iterator[None]:
    """Hold a connection for the block (reusing this thread's if it has one)."""
    opened = database.connect(reuse_if_open=True)
    try:
        yield
    finally:
        if opened and not database.in_transaction():
            database.close()


def init_app(app: Any, settings: Any) -> None:
    """Connect lazily on first query (after gunicorn forks) and close on teardown.

    Lazily, so ``/healthz`` can answer 503 itself when the database is down.
    """
    init_database(settings.database_url)

    @app.teardown_appcontext
    def _close(_exc: BaseException | None) -> None:
        if not database.is_closed():
            database.close()


def locking(query: Any, of: Any = None) -> Any:
    """``query … FOR NO KEY UPDATE`` on PostgreSQL; SQLite's BEGIN IMMEDIATE already serialises writers.

    ``NO KEY``: the lock must not conflict with the key-share locks that inserting rows
    which reference this one take (attempts and deliveries reference their endpoint),
    or every insert would queue behind it.
    """
    return query.for_update("FOR NO KEY UPDATE", of=of) if is_postgres() else query


#: PostgreSQL: this transaction's commit does not wait for the WAL flush.
RELAXED_COMMIT = "SET LOCAL synchronous_commit TO OFF"


def relaxed_commit() -> None:
    """In the current transaction, do not wait for the WAL flush at commit (PostgreSQL).

    Only for writes whose loss in a server crash costs a duplicate, never a loss: an
    outbox mark (the relay republishes), a claim (the attempt is made again).
    """
    if is_postgres():
        _set_local(RELAXED_COMMIT)


def durable_commit() -> None:
    """Undo ``relaxed_commit`` for the current transaction: its commit waits for the WAL flush."""
    if is_postgres():
        _set_local("SET LOCAL synchronous_commit TO ON")


def _set_local(statement: str) -> None:
    """A ``SET LOCAL``: with the transaction's next statement if it can wait for it."""
    if isinstance(database.obj, PooledPostgres):
        database.obj.defer(statement)
    else:
        database.execute_sql(statement)


def release_connection() -> None:
    """Hand this thread's connection back to the pool (PostgreSQL) between units of work.

    A long-lived thread (a delivery thread, the enqueuer) must not keep a pooled
    connection checked out while idle: threads come and go (tests, restarts) and the
    pool is bounded. Returning it is a cheap pool operation; SQLite keeps its file open.
    """
    if isinstance(database.obj, PooledPostgresqlDatabase) and not database.is_closed() and not database.in_transaction():
        database.close()


def try_advisory_lock(key: int) -> bool:
    """PostgreSQL: take the session-level advisory lock ``key`` on this connection if it is free."""
    (got,) = database.execute_sql("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
    return bool(got)


def advisory_unlock(key: int) -> None:
    """PostgreSQL: release the advisory lock ``key`` this connection holds."""
    database.execute_sql("SELECT pg_advisory_unlock(%s)", (key,))


def ping() -> None:
    """One round trip to the database; raises if it is not there."""
    database.execute_sql("SELECT 1").fetchone()
