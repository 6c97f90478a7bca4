"""An event keeps the W3C trace context of the request that posted it (``traceparent``, null while
tracing is off), so a relayed, released or resent delivery's attempts join or link that trace."""
from peewee import *


def up(migrator, db):
    migrator.migrate(
        migrator.add_column("event", "traceparent", CharField(max_length=128, null=True)),
    )
