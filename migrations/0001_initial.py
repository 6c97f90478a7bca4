"""Initial schema: tenants, API keys, endpoints, events, idempotency keys, deliveries, attempts.

Frozen copies of the models as they were; later migrations change the tables, not this file.
"""
from peewee import *


def up(migrator, db):
    class Tenant(Model):
        id = CharField(primary_key=True, max_length=40)
        name = CharField(max_length=200)
        event_seq = BigIntegerField(default=0)
        created_at = DateTimeField()
        class Meta:
            database = db
            table_name = 'tenant'
    db.create_tables([Tenant])

    class ApiKey(Model):
        id = CharField(primary_key=True, max_length=40)
        tenant = ForeignKeyField(Tenant, on_delete='CASCADE')
        secret_hash = CharField(max_length=64)
        created_at = DateTimeField()
        revoked_at = DateTimeField(null=True)
        class Meta:
            database = db
            table_name = 'api_key'
    db.create_tables([ApiKey])

    class Event(Model):
        id = CharField(primary_key=True, max_length=40)
        tenant = ForeignKeyField(Tenant, on_delete='CASCADE')
        seq = BigIntegerField()
        event_type = CharField(max_length=128)
        payload = TextField()
        created_at = DateTimeField()
        class Meta:
            database = db
            table_name = 'event'
            indexes = ((('tenant', 'seq'), True), (('tenant', 'event_type', 'seq'), False))
    db.create_tables([Event])

    class Endpoint(Model):
        id = CharField(primary_key=True, max_length=40)
        tenant = ForeignKeyField(Tenant, on_delete='CASCADE')
        url = TextField()
        description = TextField(default='')
        event_types = TextField(default='[]')
        rate_limit = IntegerField(null=True)
        metadata = TextField(default='{}')
        secret = CharField(max_length=120)
        previous_secret = CharField(null=True, max_length=120)
        previous_secret_until = DateTimeField(null=True)
        disabled = BooleanField(default=False)
        disabled_reason = TextField(null=True)
        created_at = DateTimeField()
        updated_at = DateTimeField()
        deleted_at = DateTimeField(null=True)
        class Meta:
            database = db
            table_name = 'endpoint'
            indexes = ((('tenant', 'deleted_at'), False),)
    db.create_tables([Endpoint])

    class Delivery(Model):
        id = CharField(primary_key=True, max_length=40)
        tenant = ForeignKeyField(Tenant, on_delete='CASCADE')
        event = ForeignKeyField(Event, on_delete='CASCADE')
        endpoint = ForeignKeyField(Endpoint, on_delete='CASCADE')
        status = CharField(max_length=16, default='pending')
        attempts = IntegerField(default=0)
        next_attempt_at = DateTimeField(null=True)
        last_status_code = IntegerField(null=True)
        last_error = TextField(null=True)
        enqueued_at = DateTimeField(null=True)
        lease_until = DateTimeField(null=True)
        created_at = DateTimeField()
        updated_at = DateTimeField()
        delivered_at = DateTimeField(null=True)
        class Meta:
            database = db
            table_name = 'delivery'
            indexes = ((('status', 'enqueued_at', 'next_attempt_at'), False), (('endpoint', 'status', 'created_at'), False))
    db.create_tables([Delivery])

    class Attempt(Model):
        id = CharField(primary_key=True, max_length=40)
        delivery = ForeignKeyField(Delivery, on_delete='CASCADE')
        tenant = ForeignKeyField(Tenant, on_delete='CASCADE')
        event = ForeignKeyField(Event, on_delete='CASCADE')
        endpoint = ForeignKeyField(Endpoint, on_delete='CASCADE')
        attempt_no = IntegerField()
        trigger = CharField(max_length=16, default='ladder')
        started_at = DateTimeField()
        duration_ms = FloatField()
        url = TextField()
        request_headers = TextField()
        response_status = IntegerField(null=True)
        response_headers = TextField(null=True)
        response_body = TextField(null=True)
        error_class = CharField(null=True, max_length=32)
        error = TextField(null=True)
        outcome = CharField(max_length=16)
        next_attempt_at = DateTimeField(null=True)
        class Meta:
            database = db
            table_name = 'attempt'
            indexes = ((('delivery', 'attempt_no'), True), (('event', 'id'), False), (('endpoint', 'id'), False))
    db.create_tables([Attempt])

    class IdempotencyKey(Model):
        tenant = ForeignKeyField(Tenant, on_delete='CASCADE')
        key = CharField()
        event = ForeignKeyField(Event, on_delete='CASCADE')
        request_hash = CharField(max_length=64)
        created_at = DateTimeField(index=True)
        class Meta:
            database = db
            table_name = 'idempotency_key'
            indexes = ((('tenant', 'key'), True),)
    db.create_tables([IdempotencyKey])


def down(migrator, db):
    migrator.migrate(migrator.drop_table('idempotency_key'))
    migrator.migrate(migrator.drop_table('attempt'))
    migrator.migrate(migrator.drop_table('delivery'))
    migrator.migrate(migrator.drop_table('endpoint'))
    migrator.migrate(migrator.drop_table('event'))
    migrator.migrate(migrator.drop_table('api_key'))
    migrator.migrate(migrator.drop_table('tenant'))
