"""An endpoint may carry its owner's own id (``uid``, the Svix API's endpoint uid): unique among a
tenant's live endpoints (checked when set), null for most."""
from peewee import *


def up(migrator, db):
    migrator.migrate(
        migrator.add_column("endpoint", "uid", CharField(max_length=64, null=True)),
        migrator.add_index("endpoint", ("tenant_id", "uid"), False),
    )
