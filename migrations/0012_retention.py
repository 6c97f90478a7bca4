"""Retention purge (RETENTION_DAYS): events are found oldest first off an index on
(created_at, id), and each tenant's ``retention_mark`` holds the highest ``seq`` purged, so a
catch-up cursor below it gets 410 instead of a silent gap."""
from peewee import *


def up(migrator, db):
    migrator.migrate(migrator.add_index("event", ("created_at", "id"), False))

    class Tenant(Model):
        id = CharField(primary_key=True, max_length=40)

        class Meta:
            database = db
            table_name = "tenant"

    class RetentionMark(Model):
        tenant = ForeignKeyField(Tenant, primary_key=True, on_delete="CASCADE")
        purged_seq = BigIntegerField()
        purged_at = DateTimeField()

        class Meta:
            database = db
            table_name = "retention_mark"

    db.create_tables([RetentionMark])
