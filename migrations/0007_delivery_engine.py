"""The asyncio delivery engine: manual attempts kept off the ladder's count, the backlog a
worker moved to the database (``spilled_at``), and each worker's concurrency window per
endpoint (shown by the API, the console and /metrics)."""
from peewee import *


def up(migrator, db):
    migrator.migrate(
        migrator.add_column("delivery", "manual_attempts", IntegerField(default=0, constraints=[SQL("DEFAULT 0")])),
        migrator.add_column("delivery", "spilled_at", DateTimeField(null=True)),
    )
    # Only spilled deliveries are in this index: it stays small, and the worker reads an
    # endpoint's spilled backlog in order straight off it.
    db.execute_sql(
        "CREATE INDEX delivery_spilled ON delivery (endpoint_id, created_at, id) WHERE spilled_at IS NOT NULL"
    )

    class EndpointWindow(Model):
        endpoint_id = CharField(max_length=40)
        worker = CharField(max_length=80)
        window = IntegerField()
        ceiling = IntegerField()
        in_flight = IntegerField()
        updated_at = DateTimeField()

        class Meta:
            database = db
            table_name = "endpoint_window"
            primary_key = CompositeKey("endpoint_id", "worker")

    db.create_tables([EndpointWindow])
