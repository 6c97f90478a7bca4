"""Endpoint health: presence columns, shared rate bucket, contacts, health history, alerts outbox."""
from peewee import *


def up(migrator, db):
    migrator.migrate(
        migrator.add_column("tenant", "contact_email", CharField(max_length=320, null=True)),
        migrator.add_column("endpoint", "contact_email", CharField(max_length=320, null=True)),
        migrator.add_column("endpoint", "health", CharField(max_length=16, default="online")),
        migrator.add_column("endpoint", "consecutive_failures", IntegerField(default=0)),
        migrator.add_column("endpoint", "failing_since", DateTimeField(null=True)),
        migrator.add_column("endpoint", "offline_since", DateTimeField(null=True)),
        migrator.add_column("endpoint", "last_success_at", DateTimeField(null=True)),
        migrator.add_column("endpoint", "probe_delivery_id", CharField(max_length=40, null=True)),
        migrator.add_column("endpoint", "rate_tokens", FloatField(null=True)),
        migrator.add_column("endpoint", "rate_updated_at", DateTimeField(null=True)),
        migrator.add_index("delivery", ("endpoint_id", "lease_until"), False),
    )

    class Tenant(Model):
        id = CharField(primary_key=True, max_length=40)

        class Meta:
            database = db
            table_name = "tenant"

    class Endpoint(Model):
        id = CharField(primary_key=True, max_length=40)

        class Meta:
            database = db
            table_name = "endpoint"

    class HealthChange(Model):
        id = AutoField()
        endpoint = ForeignKeyField(Endpoint, on_delete="CASCADE")
        tenant = ForeignKeyField(Tenant, on_delete="CASCADE")
        from_state = CharField(max_length=16)
        to_state = CharField(max_length=16)
        reason = TextField()
        created_at = DateTimeField()

        class Meta:
            database = db
            table_name = "health_change"
            indexes = ((("endpoint", "id"), False),)

    class Alert(Model):
        id = AutoField()
        tenant = ForeignKeyField(Tenant, on_delete="CASCADE")
        endpoint = ForeignKeyField(Endpoint, null=True, on_delete="CASCADE")
        kind = CharField(max_length=32)
        data = TextField()
        created_at = DateTimeField()
        raised_at = DateTimeField(null=True)
        event_id = CharField(max_length=40, null=True)
        emailed_at = DateTimeField(null=True)
        email_status = TextField(null=True)

        class Meta:
            database = db
            table_name = "alert"
            indexes = ((("raised_at",), False), (("emailed_at",), False))

    db.create_tables([HealthChange, Alert])
