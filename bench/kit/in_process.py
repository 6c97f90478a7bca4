"""The app in this process on a fresh stack's database (steps ``retention`` and ``portal``): migrated, one tenant
with one endpoint, seeded with a long history, and everything removed afterwards."""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator

from bench.kit.stack import ServiceStack
from webhooks.storage import db
from webhooks.storage.ids import ALPHABET  # Crockford base32, five bits a character

#: The ten time characters of an id made at ``ms`` milliseconds (a function of this session only).
ID_HEAD_FUNCTION = f"""CREATE OR REPLACE FUNCTION pg_temp.id_head(ms bigint) RETURNS text AS $$
    SELECT string_agg(substr('{ALPHABET}', ((ms >> (5 * (9 - i))) & 31)::int + 1, 1), '' ORDER BY i)
    FROM generate_series(0, 9) i $$ LANGUAGE sql IMMUTABLE"""


@dataclass
class InProcess:
    """A fresh stack (no process started), the app on its settings, its test client, and tenant ``bench``
    (``create_tenant``'s answer: ``id``, ``api_key``) with one endpoint (its id)."""

    stack: ServiceStack
    app: Any
    client: Any
    tenant: dict[str, Any]
    endpoint: str

    def seed(self, events: int, attempts_per_event: int, *, age: timedelta = timedelta(days=40),
             spacing: timedelta = timedelta(milliseconds=1), body_bytes: int = 1024,
             event_types: tuple[str, ...] = ("order.created",)) -> float:
        """``events`` events of the tenant's endpoint created from ``age`` ago, ``spacing`` apart (types in turn),
        each with one delivered delivery after ``attempts_per_event`` attempts (the last one a 200, the others
        500s with a ``body_bytes`` body), in a few ``INSERT … SELECT generate_series``; seconds taken, ``VACUUM
        ANALYZE`` included. Every row's id carries its creation time, as ids made by the service do, so "newest
        first" and "since" by id read them as they would read real rows."""
        started = time.monotonic()
        then = datetime.now(timezone.utc).replace(tzinfo=None) - age
        params = {"tenant": self.tenant["id"], "endpoint": self.endpoint, "then": then, "n": events,
                  "k": attempts_per_event, "body": "x" * body_bytes, "spacing": spacing.total_seconds() * 1000,
                  "types": list(event_types), "epoch_ms": int(then.replace(tzinfo=timezone.utc).timestamp() * 1000)}
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
        database = db.database
        with database.atomic():
            for sql in statements:
                database.execute_sql(sql, params)
        for table in ("event", "delivery", "attempt"):
            database.execute_sql(f"VACUUM ANALYZE {table}")
        return time.monotonic() - started


@contextmanager
def in_process(name: str, queues: bool = False) -> Iterator[InProcess]:
    """The service's database migrated (and with ``queues`` its queues declared) in this process; afterwards
    the database connections closed and the stack removed."""
    from app import create_app
    from tests.api_helpers import create_endpoint  # to the tests' HOOK_URL, where nothing listens
    from webhooks.cli import create_tenant, migrate
    from webhooks.config import Settings

    stack = ServiceStack(name)
    try:
        if queues:
            stack.release(database=False)
        db.init_database(stack.database_url)
        migrate()
        tenant = create_tenant("bench")
        app = create_app({"SETTINGS": Settings.from_env(env=stack.env)})
        logging.getLogger("webhooks").setLevel(logging.WARNING)  # no log line per request
        client = app.test_client()
        endpoint = create_endpoint(client, {"Authorization": f"Bearer {tenant['api_key']}"})["id"]
        yield InProcess(stack, app, client, tenant, endpoint)
    finally:
        if not db.database.is_closed():
            db.database.close()
        if hasattr(db.database.obj, "close_all"):
            db.database.obj.close_all()
        stack.remove()
