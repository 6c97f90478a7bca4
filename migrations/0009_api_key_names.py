"""Several named API keys per tenant: a name, an expiry (a rotated key's overlap) and when it was last used."""
from peewee import *


def up(migrator, db):
    migrator.migrate(
        migrator.add_column("api_key", "name", CharField(max_length=100, default="default")),
        migrator.add_column("api_key", "expires_at", DateTimeField(null=True)),
        migrator.add_column("api_key", "last_used_at", DateTimeField(null=True)),
    )
