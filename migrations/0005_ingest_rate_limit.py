"""Per-tenant ingestion rate limit: a token bucket on the tenant row (shared by every web worker)."""
from peewee import *


def up(migrator, db):
    migrator.migrate(
        migrator.add_column("tenant", "ingest_tokens", FloatField(null=True)),
        migrator.add_column("tenant", "ingest_updated_at", DateTimeField(null=True)),
    )
