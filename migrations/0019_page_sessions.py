"""The page kit's server-side sessions (console and portal) and the console's login throttle:
logout, a password change and a disabled account end sessions at once; login attempts are
counted per account and per address in a row every web process shares."""
from peewee import *


def up(migrator, db):
    class PageSession(Model):
        id = CharField(primary_key=True, max_length=64)
        site = CharField(max_length=32)
        subject = CharField(max_length=128)
        data = TextField(default="{}")
        created_at = DateTimeField()
        expires_at = DateTimeField()

        class Meta:
            database = db
            table_name = "page_session"
            indexes = ((("site", "subject"), False), (("expires_at",), False))

    class LoginThrottle(Model):
        key = CharField(primary_key=True, max_length=80)
        attempts = IntegerField()
        window_started_at = DateTimeField()

        class Meta:
            database = db
            table_name = "login_throttle"
            indexes = ((("window_started_at",), False),)

    db.create_tables([PageSession, LoginThrottle])
