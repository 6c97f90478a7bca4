"""Fewer indexes for the worker's hot path: every attempt inserts an attempt row and updates its
delivery twice (the lease, then the outcome), and each index is one more entry to write.

- ``delivery (endpoint_id, lease_until)`` served the thread-pool worker's count of calls in flight
  per endpoint; the engine keeps that count in memory and nothing reads it. Without it the lease
  touches no indexed column, so PostgreSQL can write it as a heap-only (HOT) update.
- ``delivery (endpoint_id)``, ``attempt (delivery_id)``, ``attempt (endpoint_id)`` and
  ``attempt (event_id)`` are the first column of another index on the same table, which serves the
  same lookups and foreign-key cascades.
"""
from peewee import *


def up(migrator, db):
    migrator.migrate(
        migrator.drop_index("delivery", "delivery_endpoint_id_lease_until"),
        migrator.drop_index("delivery", "delivery_endpoint_id"),
        migrator.drop_index("attempt", "attempt_delivery_id"),
        migrator.drop_index("attempt", "attempt_endpoint_id"),
        migrator.drop_index("attempt", "attempt_event_id"),
    )
