"""The hand-built statements that write deliveries on the worker's hot path.

Claiming a batch of attempts, moving the deliveries past them, marking them published,
spilling a backlog to the database and taking it back are each one statement for a
whole batch (a ``VALUES`` list joined to the table) instead of one peewee query per
delivery: the ``core`` step of ``bench/run.py`` measured it. The text is built once per
shape; the callers pass the parameters in the order each function names.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Protocol, Sequence, TypeVar

from webhooks.storage import sqltext
from webhooks.storage.db import database, is_postgres
from webhooks.storage.statuses import ONLINE
from webhooks.storage.models import Delivery, Endpoint

class _HasDeliveryId(Protocol):
    delivery_id: str


_Row = TypeVar("_Row", bound=_HasDeliveryId)


def in_lock_order(rows: Sequence[_Row]) -> list[_Row]:
    """``rows`` by delivery id, the order in which every multi-row statement on deliveries takes
    its row locks (the outbox mark and the statements here sort the rows before locking them:
    ``mark_enqueued_sql``, ``_in_id_order``), so two of them never wait on each other in a
    circle (PostgreSQL's "deadlock detected")."""
    return sorted(rows, key=lambda row: row.delivery_id)


#: "Its attempt is still waiting", for statements that join a batch (``v``) to the deliveries.
#: Written so that no index can serve it: the rows must be found by primary key from ``v``.
#: As a plain ``status IN (…)`` the planner may instead scan every delivery whose index
#: entry says pending (dead versions included) and hash-join the batch to them, whenever the
#: statistics say few are pending: on a table analysed after a drain, one 128-row lease read
#: 1,124 pages and took 5.6 ms instead of 0.23 ms, and a batch's PostgreSQL time grew with
#: the backlog (``bench/RESULTS-archive.md``, 2026-11-26 03:52–07:08 UTC, commit 17b94a9).
_WAITING = "({delivery}.status IN ('pending', 'retrying')) IS TRUE"

#: The lease of the common case, returning what the attempt needs to know: a ladder attempt
#: (not a fallback copy's: ``webhooks.ingest.fallback``) still the next one, not leased, to an endpoint
#: that is live, enabled, online and not rate
#: limited (every other case is decided row by row: ``webhooks.delivery.claims``). The
#: endpoint is read by correlated subqueries, not joined: a join lets the planner start from
#: the endpoint and walk all its deliveries (it did, on a freshly loaded table without
#: statistics: 20 ms a statement); a subquery is one primary-key lookup per leased row.
_LEASE = (
    "{values} UPDATE {delivery} SET lease_until = {p} FROM v "
    "WHERE {delivery}.id = v.id AND {delivery}.attempts = v.attempts "
    "AND {waiting} AND NOT {delivery}.fallback "
    "AND ({delivery}.lease_until IS NULL OR {delivery}.lease_until < {p}) "
    "AND (SELECT e.deleted_at IS NULL AND NOT e.disabled AND e.health = '{online}' AND COALESCE(e.rate_limit, 0) = 0 "
    "FROM {endpoint} e WHERE e.id = {delivery}.endpoint_id){lock} "
    "RETURNING {delivery}.id, {delivery}.status, {delivery}.manual_attempts, {delivery}.next_attempt_at, "
    "{delivery}.endpoint_id{endpoint_columns}"
)

#: What the attempt needs of its endpoint (``EndpointView``), returned by the lease on
#: PostgreSQL (as stored: the URL and secrets sealed); on SQLite it is read after the lease,
#: in the same transaction.
LEASE_ENDPOINT_COLUMNS = ("url", "secret", "previous_secret", "previous_secret_until")

#: The columns a delivery moves to after its attempt, and their types on PostgreSQL.
ADVANCE_COLUMNS = (
    ("id", "text"), ("attempts", "int"), ("status", "text"), ("next_attempt_at", "timestamp"),
    ("last_status_code", "int"), ("last_error", "text"), ("enqueued_at", "timestamp"),
    ("delivered_at", "timestamp"), ("manual_attempts", "int"),
)

_ADVANCE = (
    "{values} UPDATE {delivery} SET attempts = v.attempts, status = v.status, "
    "next_attempt_at = v.next_attempt_at, last_status_code = v.last_status_code, last_error = v.last_error, "
    "enqueued_at = v.enqueued_at, delivered_at = COALESCE(v.delivered_at, {delivery}.delivered_at), "
    "manual_attempts = v.manual_attempts, lease_until = NULL, spilled_at = NULL, updated_at = {p} "
    "FROM v WHERE {delivery}.id = v.id AND {delivery}.attempts = v.attempts - 1{lock} "
    "RETURNING {delivery}.id"
)


def _in_id_order(postgres: bool) -> str:
    """PostgreSQL: lock the rows of ``v`` in id order before the join updates them.

    An ``UPDATE … FROM v`` locks rows in whatever order its join produces them, not in the
    order of the ``VALUES``; against the outbox mark (which locks in id order) that
    deadlocked under a flood with two workers: PostgreSQL found it only after
    ``deadlock_timeout`` (1 s) and the batch was retried, so a tenant's event took 1.5 s.
    """
    if not postgres:
        return ""  # SQLite writes one transaction at a time
    table = sqltext.table(Delivery)
    return f" AND {table}.id IN (SELECT id FROM {table} WHERE id IN (SELECT id FROM v) ORDER BY id FOR UPDATE)"


@lru_cache(maxsize=256)
def _lease_sql(postgres: bool, param: str, count: int) -> str:
    return _LEASE.format(
        values=sqltext.values_cte("v", ("id", "attempts"), ("text", "int") if postgres else None, count, param),
        delivery=sqltext.table(Delivery), endpoint=sqltext.table(Endpoint), p=param, online=ONLINE,
        waiting=_WAITING.format(delivery=sqltext.table(Delivery)),
        lock=_in_id_order(postgres),
        endpoint_columns="".join(
            f", (SELECT e.{name} FROM {sqltext.table(Endpoint)} e WHERE e.id = {sqltext.table(Delivery)}.endpoint_id)"
            for name in LEASE_ENDPOINT_COLUMNS
        ) if postgres else "",
    )


def lease_sql(count: int) -> str:
    """Lease ``count`` deliveries whose attempt is still the next one and not leased, if their
    endpoint is in the common case (``_LEASE``).

    Parameters: (delivery id, attempts so far) for each, the lease's end, now. Returns
    ``id, status, manual_attempts, next_attempt_at, endpoint_id`` of each delivery leased,
    and on PostgreSQL its endpoint's ``LEASE_ENDPOINT_COLUMNS``.
    """
    return _lease_sql(is_postgres(), database.obj.param, count)


def _still_next(param: str, count: int) -> str:
    return " OR ".join([f"(id = {param} AND attempts = {param})"] * count)


def take_leases_sql(count: int) -> str:
    """Lease ``count`` deliveries while their attempt is still the next one, whatever their lease.

    Parameters: the lease's end, then (delivery id, attempts so far) for each.
    """
    param = database.obj.param
    return f"UPDATE {sqltext.table(Delivery)} SET lease_until = {param} WHERE {_still_next(param, count)}"


def leased_sql(count: int) -> str:
    """Which of ``count`` deliveries hold a given lease. Parameters: as ``take_leases_sql``."""
    param = database.obj.param
    return f"SELECT id FROM {sqltext.table(Delivery)} WHERE lease_until = {param} AND ({_still_next(param, count)})"


@lru_cache(maxsize=256)
def _advance_sql(postgres: bool, param: str, count: int) -> str:
    names = tuple(name for name, _ in ADVANCE_COLUMNS)
    casts = tuple(cast for _, cast in ADVANCE_COLUMNS) if postgres else None
    return _ADVANCE.format(values=sqltext.values_cte("v", names, casts, count, param),
                           delivery=sqltext.table(Delivery), p=param, lock=_in_id_order(postgres))


def advance_sql(count: int) -> str:
    """Move ``count`` deliveries past their attempt if it is still the next one.

    Parameters: the ``ADVANCE_COLUMNS`` of each delivery, then now. Returns the ids moved.
    """
    return _advance_sql(is_postgres(), database.obj.param, count)


_SPILL = (
    "{values} UPDATE {delivery} SET spilled_at = {p} FROM v "
    "WHERE {delivery}.id = v.id AND {delivery}.attempts = v.attempts "
    "AND {waiting}{lock} RETURNING {delivery}.id"
)


@lru_cache(maxsize=256)
def _spill_sql(postgres: bool, param: str, count: int) -> str:
    return _SPILL.format(values=sqltext.values_cte("v", ("id", "attempts"), ("text", "int") if postgres else None,
                                                   count, param),
                         delivery=sqltext.table(Delivery), p=param, lock=_in_id_order(postgres),
                         waiting=_WAITING.format(delivery=sqltext.table(Delivery)))


def spill_sql(count: int) -> str:
    """Mark ``count`` deliveries as waiting in the database if their attempt is still the next one.

    Parameters: (delivery id, attempts so far) for each, then now. Returns the ids marked.
    """
    return _spill_sql(is_postgres(), database.obj.param, count)


def take_spilled_sql() -> str:
    """Take an endpoint's oldest spilled deliveries that nobody holds, holding them until a given
    time (``spilled_at`` in the future: a worker's lanes have them), skipping rows others lock.

    Parameters: the hold's end, the endpoint id, now, how many. Returns the ids taken.
    """
    table, param = sqltext.table(Delivery), database.obj.param
    skip_locked = " FOR UPDATE SKIP LOCKED" if is_postgres() else ""
    return (f"UPDATE {table} SET spilled_at = {param} WHERE id IN ("
            f"SELECT id FROM {table} WHERE endpoint_id = {param} AND spilled_at IS NOT NULL AND spilled_at <= {param} "
            f"ORDER BY created_at, id LIMIT {param}{skip_locked}) RETURNING id")


@lru_cache(maxsize=None)
def mark_enqueued_sql() -> str:
    """PostgreSQL: mark every delivery of one attempt number as published.

    The rows are locked in id order first (``ORDER BY … FOR UPDATE`` locks after sorting):
    a bare ``id = ANY(…)`` may walk them in the heap's order, and a worker claiming or
    recording the same deliveries in id order then deadlocks with it (seen under a flood:
    every "deadlock detected" in the bench's PostgreSQL log was this mark against a claim
    or a record, each costing a batch of deliveries a retry).

    Parameters: now, the delivery ids as one array, the attempts so far.
    """
    table = f'"{Delivery._meta.table_name}"'
    return (
        f'UPDATE {table} SET "enqueued_at" = %s WHERE "id" IN ('
        f'SELECT "id" FROM {table} WHERE "id" = ANY(%s) AND "attempts" = %s AND "enqueued_at" IS NULL '
        'ORDER BY "id" FOR UPDATE)'
    )
