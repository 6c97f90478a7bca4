"""The SQL text of ``POST /v1/events`` and its batch (see ``webhooks.ingest.accept``), built once per shape.

Spelled for PostgreSQL and for SQLite (``Dialect``); table and column names come from the
models through ``webhooks.storage.sqltext``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from webhooks.storage.models import Delivery, Endpoint, Event, IdempotencyKey, Tenant
from webhooks.storage.sqltext import columns, insert_sql, table

#: Rows per INSERT statement at most (SQLite allows 32,766 parameters in one statement).
INSERT_CHUNK = 500

#: Columns written for a new event, idempotency key and delivery (field names).
EVENT_FIELDS = ("id", "tenant", "seq", "event_type", "payload", "created_at", "traceparent", "test")
KEY_FIELDS = ("tenant", "key", "event", "request_hash", "created_at")
DELIVERY_FIELDS = ("id", "tenant", "event", "endpoint", "status", "attempts", "next_attempt_at", "created_at",
                   "updated_at", "fallback")


@dataclass(frozen=True)
class Dialect:
    """The few SQL spellings that differ between PostgreSQL and SQLite."""

    param: str
    least: str
    greatest: str
    #: Seconds from the ``ingest_updated_at`` column to the parameter ``{now}`` (see ``now_param``).
    seconds_since_update: str
    #: ``now`` as that parameter: a timestamp, or (SQLite) unix seconds.
    epoch_now: bool

    def now_param(self, now: datetime) -> Any:
        return now.replace(tzinfo=timezone.utc).timestamp() if self.epoch_now else now


POSTGRES = Dialect("%s", "LEAST", "GREATEST", 'EXTRACT(EPOCH FROM ({now} - "ingest_updated_at"))::float8', False)
# SQLite keeps timestamps as text ("2026-11-22 12:00:00.123456"). Its date functions only
# honour milliseconds, which at 1,000 events/s is a whole token: the fraction is read
# from the text instead.
SQLITE = Dialect(
    "?", "MIN", "MAX",
    '({now} - (CAST(strftime(\'%s\', "ingest_updated_at") AS REAL) + CAST(substr("ingest_updated_at", 20) AS REAL)))',
    True,
)


@lru_cache(maxsize=None)
def bump_sql(dialect: Dialect, limited: bool) -> str:
    """``UPDATE tenant … RETURNING event_seq, ingest_tokens``: seq + n for a batch of n events
    and, when ``limited``, its cost in tokens spent from the bucket (refilled for the time
    since it was last used, capped at one second's worth). Parameters: ``bump_params``.

    The remaining tokens come back negative when there were fewer than n: the caller rolls back.
    A deleted tenant's row is not bumped (no row comes back): it takes no event, whatever key.
    """
    p = dialect.param
    sets = [f'"event_seq" = "event_seq" + {p}']
    if limited:
        elapsed = dialect.seconds_since_update.format(now=p)
        sets += [
            f'"ingest_tokens" = {dialect.least}({p}, COALESCE("ingest_tokens" + '
            f"{dialect.greatest}(0, {elapsed}) * {p}, {p})) - {p}",
            f'"ingest_updated_at" = {dialect.greatest}(COALESCE("ingest_updated_at", {p}), {p})',
        ]
    return (f"UPDATE {table(Tenant)} SET {', '.join(sets)} WHERE \"id\" = {p} AND \"deleted_at\" IS NULL "
            f'RETURNING "event_seq", "ingest_tokens"')


def bump_params(dialect: Dialect, tenant_id: str, rate_limit: float | None, now: datetime, count: int,
                cost: int) -> list[Any]:
    """``bump_sql``'s parameters: ``count`` events, spending ``cost`` tokens when ``rate_limit`` is set."""
    if rate_limit is None:
        return [count, tenant_id]
    return [count, rate_limit, dialect.now_param(now), rate_limit, rate_limit, cost, now, now, tenant_id]


@lru_cache(maxsize=None)
def endpoints_sql(dialect: Dialect) -> str:
    """The tenant's live endpoints that take messages without channels (all events), as much as routing
    needs (whether each names a fallback too). Parameter: tenant id."""
    return (f'SELECT "id", "event_types", "disabled", "health", "filter", "fallback_url" IS NOT NULL FROM {table(Endpoint)} '
            f'WHERE "tenant_id" = {dialect.param} AND "deleted_at" IS NULL AND "channels" IS NULL ORDER BY "id"')


@lru_cache(maxsize=None)
def postgres_read_sql(with_keys: bool) -> str:
    """Round trip 1 on PostgreSQL, outside any transaction: whether any idempotency key is on
    file, and the tenant's live endpoints without channels (as ``endpoints_sql``). Nothing is locked.

    One row per live endpoint (one row of NULL endpoint columns when there is none):
    ``any_key_seen, id, event_types, disabled, health, filter, has_fallback``. Parameters: [tenant id, the keys
    as one array,] tenant id.
    """
    key_seen = (f'EXISTS (SELECT 1 FROM {table(IdempotencyKey)} WHERE "tenant_id" = %s AND "key" = ANY(%s))'
                if with_keys else "FALSE")
    return (
        f'SELECT {key_seen}, e."id", e."event_types", e."disabled", e."health", e."filter", '
        f'e."fallback_url" IS NOT NULL '
        f'FROM (SELECT 1) AS "one" LEFT JOIN {table(Endpoint)} e ON e."tenant_id" = %s AND e."deleted_at" IS NULL '
        f'AND e."channels" IS NULL ORDER BY e."id"'
    )


@lru_cache(maxsize=256)
def postgres_write_sql(limited: bool, events: int, keys: int, deliveries: int) -> str:
    """Round trip 2 on PostgreSQL: the whole write as one statement, so one transaction of its own.

    ``WITH bumped AS (UPDATE tenant … RETURNING …)`` takes the tenant row's lock and the
    seqs; the events (their seqs counted from the bump in SQL), keys and deliveries are
    inserted by the same statement, which returns ``event_seq, ingest_tokens``. The lock is
    held from the bump to the commit of this one statement only: no round trip to the web
    process and none of its time (at 200 events/s to one tenant the lock had been waited
    on for longer than the statements ran). When the bump finds the tenant gone or, if
    ``limited``, too few tokens, the first seq is NULL and ``event.seq NOT NULL`` fails the
    statement: nothing is written (SQLSTATE 23502; the caller asks again the slow way).

    Parameters: the bump's, then each event's fields but its seq, each key's, each
    delivery's (rows of at most ``INSERT_CHUNK``; one CTE per chunk).
    """
    spendable = ' WHERE "ingest_tokens" >= 0' if limited else ""
    row = "(" + ", ".join('(SELECT "seq" FROM "first") + {k}' if name == "seq" else "%s" for name in EVENT_FIELDS) + ")"
    parts = [
        f"bumped AS ({bump_sql(POSTGRES, limited)})",
        f'"first" AS (SELECT "event_seq" - {events - 1} AS "seq" FROM bumped{spendable})',
    ]
    for start in range(0, events, INSERT_CHUNK):
        rows = ", ".join(row.format(k=k) for k in range(start, min(events, start + INSERT_CHUNK)))
        parts.append(f"events_{start} AS (INSERT INTO {table(Event)} ({columns(Event, EVENT_FIELDS)}) VALUES {rows})")
    for name, count, build in (("keys", keys, insert_keys_sql), ("deliveries", deliveries, insert_deliveries_sql)):
        for start in range(0, count, INSERT_CHUNK):
            parts.append(f"{name}_{start} AS ({build(POSTGRES, min(INSERT_CHUNK, count - start))})")
    return "WITH " + ", ".join(parts) + ' SELECT "event_seq", "ingest_tokens" FROM bumped'


@lru_cache(maxsize=64)
def insert_events_sql(dialect: Dialect, count: int) -> str:
    """One multi-row insert of ``count`` events."""
    return insert_sql(Event, EVENT_FIELDS, count, dialect.param)


@lru_cache(maxsize=64)
def insert_keys_sql(dialect: Dialect, count: int) -> str:
    """One multi-row insert of ``count`` idempotency keys."""
    return insert_sql(IdempotencyKey, KEY_FIELDS, count, dialect.param)


@lru_cache(maxsize=64)
def insert_deliveries_sql(dialect: Dialect, count: int) -> str:
    """One multi-row insert of ``count`` deliveries."""
    return insert_sql(Delivery, DELIVERY_FIELDS, count, dialect.param)


def delete_keys_sql(dialect: Dialect, count: int) -> str:
    """Forget ``count`` expired idempotency keys of a tenant. Parameters: tenant id, the keys."""
    p = dialect.param
    return f'DELETE FROM {table(IdempotencyKey)} WHERE "tenant_id" = {p} AND "key" IN ({", ".join([p] * count)})'
