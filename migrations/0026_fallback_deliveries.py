"""Fallback while an endpoint is offline: an endpoint may name a ``fallback_url``; a delivery (and
its attempts) may be a ``fallback`` copy for it, at most one per event and endpoint (a partial
unique index: what makes "told to the fallback exactly once" hold under races).

The flags are added with their default in one statement, which neither database rewrites the
table for (PostgreSQL 11+ keeps a constant default in the catalog; SQLite's ADD COLUMN never
rewrites): the delivery and attempt tables are the largest there are."""
from playhouse.migrate import PostgresqlMigrator


def up(migrator, db):
    postgres = isinstance(migrator, PostgresqlMigrator)
    boolean, false = ("BOOLEAN", "FALSE") if postgres else ("INTEGER", "0")
    for table in ("delivery", "attempt"):
        db.execute_sql(f'ALTER TABLE "{table}" ADD COLUMN "fallback" {boolean} NOT NULL DEFAULT {false}')
    db.execute_sql('ALTER TABLE "endpoint" ADD COLUMN "fallback_url" TEXT')
    db.execute_sql('CREATE UNIQUE INDEX "delivery_fallback_once" ON "delivery" ("endpoint_id", "event_id") WHERE "fallback"')
