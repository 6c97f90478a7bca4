"""Who asked for each resend and recover (a tenant API key, a staff member or the command line)."""
from peewee import *


def up(migrator, db):
    def existing(name):
        class Existing(Model):
            id = CharField(primary_key=True, max_length=40)

            class Meta:
                database = db
                table_name = name
        return Existing

    tenant, event, delivery = existing("tenant"), existing("event"), existing("delivery")

    class ManualAttempt(Model):
        id = AutoField()
        delivery_ = ForeignKeyField(delivery, column_name="delivery_id", on_delete="CASCADE")
        event_ = ForeignKeyField(event, column_name="event_id", on_delete="CASCADE")
        tenant_ = ForeignKeyField(tenant, column_name="tenant_id", on_delete="CASCADE")
        attempt_no = IntegerField()
        trigger = CharField(max_length=16)
        requested_by_kind = CharField(max_length=16)
        requested_by = CharField(max_length=320)
        created_at = DateTimeField()

        class Meta:
            database = db
            table_name = "manual_attempt"
            indexes = ((("event_", "id"), False), (("delivery_", "attempt_no"), False))

    db.create_tables([ManualAttempt])
