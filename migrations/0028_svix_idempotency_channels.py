"""The Svix API (issue 37): the answers to its POSTs sent with an ``idempotency-key``, kept as long
as ingestion's keys; an endpoint's Svix ``channels`` (null for every endpoint so far)."""
from peewee import *


def up(migrator, db):
    class ApiKey(Model):
        id = CharField(primary_key=True, max_length=40)

        class Meta:
            database = db
            table_name = "api_key"

    class IdempotentResponse(Model):
        api_key = ForeignKeyField(ApiKey, on_delete="CASCADE")
        key = CharField(max_length=255)
        request_hash = CharField(max_length=64)
        status = IntegerField(null=True)
        body = TextField(null=True)
        created_at = DateTimeField(index=True)

        class Meta:
            database = db
            table_name = "idempotent_response"
            indexes = ((("api_key", "key"), True),)

    db.create_tables([IdempotentResponse])
    migrator.migrate(migrator.add_column("endpoint", "channels", TextField(null=True)))
