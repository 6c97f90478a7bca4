"""The SQL text of ``POST /v1/events`` (see ``webhooks.ingest``), built once per shape.

Spelled for PostgreSQL and for SQLite (``Dialect``); table and column names come from the
models through ``webhooks.sqltext``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any

from webhooks.models import Delivery, Endpoint, Event, IdempotencyKey, Tenant
from webhooks.sqltext import insert_sql, table

#: Columns written for a new event, idempotency key and delivery (field names).
EVENT_FIELDS = ("id", "tenant", "seq", "event_type", "payload", "created_at")
KEY_FIELDS = ("tenant", "key", "event", "request_hash", "created_at")
DELIVERY_FIELDS = ("id", "tenant", "event", "endpoint", "status", "attempts", "next_attempt_at", "created_at",
                   "updated_at")


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
    """``UPDATE tenant … RETURNING event_seq, ingest_tokens``: seq + 1 and, when ``limited``,
    one token spent from the bucket (refilled for the time since it was last used, capped
    at one second's worth). Parameters: ``bump_params``.

    The remaining tokens come back negative when none was left: the caller rolls back.
    """
    p = dialect.param
    sets = ['"event_seq" = "event_seq" + 1']
    if limited:
        elapsed = dialect.seconds_since_update.format(now=p)
        sets += [
            f'"ingest_tokens" = {dialect.least}({p}, COALESCE("ingest_tokens" + '
            f"{dialect.greatest}(0, {elapsed}) * {p}, {p})) - 1",
            f'"ingest_updated_at" = {dialect.greatest}(COALESCE("ingest_updated_at", {p}), {p})',
        ]
    return (f"UPDATE {table(Tenant)} SET {', '.join(sets)} WHERE \"id\" = {p} "
            f'RETURNING "event_seq", "ingest_tokens"')


def bump_params(dialect: Dialect, tenant_id: str, rate_limit: float | None, now: datetime) -> list[Any]:
    if rate_limit is None:
        return [tenant_id]
    return [rate_limit, dialect.now_param(now), rate_limit, rate_limit, now, now, tenant_id]


@lru_cache(maxsize=None)
def endpoints_sql(dialect: Dialect) -> str:
    """The tenant's live endpoints, as much as routing needs. Parameter: tenant id."""
    return (f'SELECT "id", "event_types", "disabled", "health" FROM {table(Endpoint)} '
            f'WHERE "tenant_id" = {dialect.param} AND "deleted_at" IS NULL ORDER BY "id"')


@lru_cache(maxsize=None)
def key_seen_sql(dialect: Dialect) -> str:
    """Is the idempotency key on file? Parameters: tenant id, key."""
    p = dialect.param
    return f'SELECT 1 FROM {table(IdempotencyKey)} WHERE "tenant_id" = {p} AND "key" = {p}'


@lru_cache(maxsize=None)
def postgres_start_sql(limited: bool, with_key: bool) -> str:
    """Round trip 1 on PostgreSQL (after ``BEGIN``): bump, look up the key and the endpoints.

    One row per live endpoint (one row of NULL endpoint columns when there is none):
    ``event_seq, ingest_tokens, key_seen, id, event_types, disabled, health``.
    Parameters: the bump's, [tenant id, key,] tenant id.
    """
    key_seen = f"EXISTS ({key_seen_sql(POSTGRES)})" if with_key else "FALSE"
    return (
        f"WITH bumped AS ({bump_sql(POSTGRES, limited)}) "
        f'SELECT b."event_seq", b."ingest_tokens", {key_seen}, e."id", e."event_types", e."disabled", e."health" '
        f'FROM bumped b LEFT JOIN {table(Endpoint)} e ON e."tenant_id" = %s AND e."deleted_at" IS NULL '
        f'ORDER BY e."id"'
    )


@lru_cache(maxsize=None)
def insert_event_sql(dialect: Dialect) -> str:
    return insert_sql(Event, EVENT_FIELDS, 1, dialect.param)


@lru_cache(maxsize=None)
def insert_key_sql(dialect: Dialect) -> str:
    return insert_sql(IdempotencyKey, KEY_FIELDS, 1, dialect.param)


@lru_cache(maxsize=64)
def insert_deliveries_sql(dialect: Dialect, count: int) -> str:
    """One multi-row insert of ``count`` deliveries."""
    return insert_sql(Delivery, DELIVERY_FIELDS, count, dialect.param)
