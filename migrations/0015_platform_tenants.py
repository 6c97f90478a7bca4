"""Platforms and tenants: platform keys (an API key with no tenant), a tenant's ``uid`` and
``metadata``, and its soft delete (``deleted_at``); names and uids are unique among live tenants."""
from peewee import *


def up(migrator, db):
    migrator.migrate(
        migrator.drop_not_null("api_key", "tenant_id"),
        migrator.add_column("tenant", "uid", CharField(max_length=64, null=True)),
        migrator.add_column("tenant", "metadata", TextField(default="{}")),
        migrator.add_column("tenant", "deleted_at", DateTimeField(null=True)),
    )
    # A deleted tenant frees its name and uid at once (its rows go later, with the clock).
    db.execute_sql("DROP INDEX tenant_name_unique")
    db.execute_sql("CREATE UNIQUE INDEX tenant_name_unique ON tenant (LOWER(name)) WHERE deleted_at IS NULL")
    db.execute_sql("CREATE UNIQUE INDEX tenant_uid_unique ON tenant (uid) WHERE deleted_at IS NULL")
    db.execute_sql("CREATE INDEX tenant_deleted_at ON tenant (deleted_at)")
