"""Support console: staff users, the audit log of operator actions, bulk replay jobs."""
from peewee import *


def up(migrator, db):
    class StaffUser(Model):
        id = AutoField()
        email = CharField(max_length=320, unique=True)
        password_hash = CharField(max_length=255)
        role = CharField(max_length=16, default="viewer")
        active = BooleanField(default=True)
        created_at = DateTimeField()
        last_login_at = DateTimeField(null=True)

        class Meta:
            database = db
            table_name = "staff_user"

    class AuditEntry(Model):
        id = AutoField()
        actor = CharField(max_length=320)
        action = CharField(max_length=32)
        target_type = CharField(max_length=32)
        target_id = CharField(max_length=64)
        event_id = CharField(max_length=40, null=True)
        detail = TextField(default="{}")
        created_at = DateTimeField()

        class Meta:
            database = db
            table_name = "audit_entry"
            indexes = ((("target_type", "target_id"), False), (("event_id",), False))

    class ReplayJob(Model):
        id = AutoField()
        actor = CharField(max_length=320)
        filters = TextField(default="{}")
        status = CharField(max_length=16, default="queued")
        total = IntegerField(default=0)
        done = IntegerField(default=0)
        upto_id = CharField(max_length=40, null=True)
        cursor = CharField(max_length=40, null=True)
        error = TextField(null=True)
        runner = CharField(max_length=32, null=True)
        heartbeat_at = DateTimeField(null=True)
        created_at = DateTimeField()
        finished_at = DateTimeField(null=True)

        class Meta:
            database = db
            table_name = "replay_job"

    db.create_tables([StaffUser, AuditEntry, ReplayJob])
