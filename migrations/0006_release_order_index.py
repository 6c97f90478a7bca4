"""The next parked delivery to release is read off one index in release order (created_at, id),
so finding it costs one index entry however many are parked and whatever the planner's
statistics say (it used to sort every parked delivery of the endpoint when they were stale)."""
from peewee import *


def up(migrator, db):
    migrator.migrate(
        migrator.add_index("delivery", ("endpoint_id", "status", "created_at", "id"), False),
        migrator.drop_index("delivery", "delivery_endpoint_id_status_created_at"),
    )
