"""The event-type catalog (issue 33): ``event_type`` rows with their JSON Schema and examples;
an endpoint's payload ``filter``; test events (``event.test``) sent by ``send-example``."""
from peewee import *


def up(migrator, db):
    class EventType(Model):
        name = CharField(primary_key=True, max_length=128)
        description = TextField(default="")
        group_name = CharField(max_length=128, null=True)
        schema = TextField(null=True)
        examples = TextField(default="[]")
        deprecated = BooleanField(default=False)
        archived_at = DateTimeField(null=True)
        version = IntegerField(default=1)
        created_at = DateTimeField()
        updated_at = DateTimeField()

        class Meta:
            database = db
            table_name = "event_type"
            indexes = ((("group_name", "name"), False),)

    db.create_tables([EventType])
    migrator.migrate(
        migrator.add_column("endpoint", "filter", TextField(null=True)),
        migrator.add_column("event", "test", BooleanField(default=False)),
    )
