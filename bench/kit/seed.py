"""Seeding a PostgreSQL database with finished events, deliveries and attempts for one tenant and endpoint, in a
few ``INSERT … SELECT generate_series`` statements. Every row's id carries its own creation time, as ids made by
the service do (computed in SQL), so "newest first" and "since" by id read them as they would read real rows."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Any

from webhooks.storage.ids import ALPHABET  # Crockford base32, five bits a character

#: The ten time characters of an id made at ``ms`` milliseconds (a function of this session only).
ID_HEAD_FUNCTION = f"""CREATE OR REPLACE FUNCTION pg_temp.id_head(ms bigint) RETURNS text AS $$
    SELECT string_agg(substr('{ALPHABET}', ((ms >> (5 * (9 - i))) & 31)::int + 1, 1), '' ORDER BY i)
    FROM generate_series(0, 9) i $$ LANGUAGE sql IMMUTABLE"""


def seed(database: Any, tenant_id: str, endpoint_id: str, events: int, attempts_per_event: int, *,
         age: timedelta = timedelta(days=40), spacing: timedelta = timedelta(milliseconds=1),
         body_bytes: int = 1024, event_types: tuple[str, ...] = ("order.created",)) -> float:
    """``events`` events created from ``age`` ago, ``spacing`` apart (types in turn), each with one
    delivered delivery after ``attempts_per_event`` attempts (the last one a 200, the others 500s with
    a ``body_bytes`` body); seconds taken, ``VACUUM ANALYZE`` included."""
    started = time.monotonic()
    then = datetime.now(timezone.utc).replace(tzinfo=None) - age
    params = {"tenant": tenant_id, "endpoint": endpoint_id, "then": then, "n": events, "k": attempts_per_event,
              "body": "x" * body_bytes, "spacing": spacing.total_seconds() * 1000, "types": list(event_types),
              "epoch_ms": int(then.replace(tzinfo=timezone.utc).timestamp() * 1000)}
    ident = "lpad(g::text, 16, '0')"
    at = "%(then)s + g * %(spacing)s * interval '1 millisecond'"
    head = "pg_temp.id_head(%(epoch_ms)s + (g * %(spacing)s)::bigint)"
    statements = [
        ID_HEAD_FUNCTION,
        f"""INSERT INTO event (id, tenant_id, seq, event_type, payload, created_at, test)
            SELECT 'evt_' || {head} || {ident}, %(tenant)s, g,
                   (%(types)s::text[])[1 + g %% array_length(%(types)s::text[], 1)], '{{"order":' || g || '}}', {at},
                   false
            FROM generate_series(1, %(n)s) g""",
        f"""INSERT INTO delivery (id, tenant_id, event_id, endpoint_id, status, attempts, manual_attempts,
                                  enqueued_at, created_at, updated_at, delivered_at, last_status_code)
            SELECT 'dlv_' || {head} || {ident}, %(tenant)s, 'evt_' || {head} || {ident}, %(endpoint)s, 'delivered',
                   %(k)s, 0, t, t, t, t, 200
            FROM generate_series(1, %(n)s) g, LATERAL (SELECT {at} AS t) times""",
        f"""INSERT INTO attempt (id, delivery_id, tenant_id, event_id, endpoint_id, attempt_no, trigger, started_at,
                                 duration_ms, url, request_headers, response_status, response_headers, response_body,
                                 error_class, error, outcome)
            SELECT 'att_' || {head} || lpad(a::text, 16, '0'), 'dlv_' || {head} || {ident}, %(tenant)s,
                   'evt_' || {head} || {ident}, %(endpoint)s, n, 'ladder', {at},
                   5 + (a %% 97), 'http://127.0.0.1:9/hook', '{{"webhook-id":"evt"}}',
                   CASE WHEN n = %(k)s THEN 200 ELSE 500 END, '{{"content-type":"text/plain"}}', %(body)s,
                   CASE WHEN n = %(k)s THEN NULL ELSE 'http_status' END,
                   CASE WHEN n = %(k)s THEN NULL ELSE 'HTTP 500' END,
                   CASE WHEN n = %(k)s THEN 'delivered' ELSE 'failed' END
            FROM generate_series(1, %(n)s * %(k)s) a,
                 LATERAL (SELECT (a - 1) / %(k)s + 1 AS g, (a - 1) %% %(k)s + 1 AS n) s""",
        "UPDATE tenant SET event_seq = %(n)s WHERE id = %(tenant)s",
    ]
    with database.atomic():
        for sql in statements:
            database.execute_sql(sql, params)
    for table in ("event", "delivery", "attempt"):
        database.execute_sql(f"VACUUM ANALYZE {table}")
    return time.monotonic() - started
