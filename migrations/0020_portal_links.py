"""The customer portal's one-time access links: their hash, the tenant, the capabilities
the session will carry, when they expire and when they were used."""
from peewee import *


def up(migrator, db):
    class Tenant(Model):
        id = CharField(primary_key=True, max_length=40)

        class Meta:
            database = db
            table_name = "tenant"

    class PortalLink(Model):
        id = CharField(primary_key=True, max_length=64)
        tenant = ForeignKeyField(Tenant, on_delete="CASCADE")
        capabilities = TextField(default="[]")
        created_at = DateTimeField()
        expires_at = DateTimeField()
        used_at = DateTimeField(null=True)

        class Meta:
            database = db
            table_name = "portal_link"
            indexes = ((("expires_at",), False),)

    db.create_tables([PortalLink])
