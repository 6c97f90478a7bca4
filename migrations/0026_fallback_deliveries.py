"""Fallback while an endpoint is offline: an endpoint may name a ``fallback_url``; a delivery (and
its attempts) may be a ``fallback`` copy for it, at most one per event and endpoint (a partial
unique index: what makes "told to the fallback exactly once" hold under races)."""
from peewee import *


def up(migrator, db):
    migrator.migrate(
        migrator.add_column("endpoint", "fallback_url", TextField(null=True)),
        migrator.add_column("delivery", "fallback", BooleanField(default=False)),
        migrator.add_column("attempt", "fallback", BooleanField(default=False)),
    )
    db.execute_sql("CREATE UNIQUE INDEX delivery_fallback_once ON delivery (endpoint_id, event_id) WHERE fallback")
