"""Storage: the database connection, the tables, and the SQL that peewee is not fast enough for.

``db`` (SQLite or pooled PostgreSQL, transactions, retries), ``models`` (every table),
``ids`` and ``timeutil`` (the values rows hold), ``statuses`` (the states a delivery and
an endpoint can be in), ``endpoint_windows`` (each worker's concurrency windows, as
last reported), ``retention`` (the purge of what is older than ``RETENTION_DAYS``) and
``db_errors`` (why the database could not be reached, in words).

One rule for SQL: every module uses peewee's query builder, except on a hot path a
benchmark shows needs more. Those hand-built statements live here, beside the models
they write: ``sqltext`` (helpers that build statement text once per shape),
``ingest_sql`` (the ingest transaction), ``delivery_sql`` (claiming, recording and
marking deliveries) and ``pg_prepared`` (server-side prepared statements).

May import: nothing of ``webhooks`` outside this folder but ``webhooks.secrecy`` (which
imports nothing of ours).
"""
