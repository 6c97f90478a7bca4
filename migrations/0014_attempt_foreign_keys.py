"""An attempt row checks one foreign key, its delivery's, instead of four (PostgreSQL).

The attempt's ``tenant_id``, ``event_id`` and ``endpoint_id`` are copies of its delivery's,
written by the worker from the same message, and the delivery's own foreign keys hold them:
a tenant, event or endpoint deleted takes its deliveries with it, and a delivery its
attempts. Checking them again on every attempt row cost PostgreSQL a row lookup and lock
each, and ``attempt (tenant_id)`` was read by nothing but that cascade: dropped too. Measured
in ``bench/RESULTS-archive.md`` (2026-11-26 03:52–07:08 UTC, commit 17b94a9). SQLite keeps its schema as it is: rebuilding
the table there is not worth it for a database that does not take this load.
"""
from peewee import *


def up(migrator, db):
    if not isinstance(db, PostgresqlDatabase):
        return
    migrator.migrate(
        migrator.drop_foreign_key_constraint("attempt", "tenant_id"),
        migrator.drop_foreign_key_constraint("attempt", "event_id"),
        migrator.drop_foreign_key_constraint("attempt", "endpoint_id"),
        migrator.drop_index("attempt", "attempt_tenant_id"),
    )
