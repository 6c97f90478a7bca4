"""An offline endpoint is probed at a bounded interval (``PROBE_INTERVAL``), not at a delivery's
ladder tiers: ``endpoint.next_probe_at`` says when the clock probes it next."""
from peewee import *


def up(migrator, db):
    migrator.migrate(
        migrator.add_column("endpoint", "next_probe_at", DateTimeField(null=True)),
    )
