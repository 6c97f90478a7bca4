"""Tenant names are unique, whatever their case (``flask dlq replay --tenant acme`` must name one tenant).

Existing duplicates are renamed first: the oldest tenant of a name keeps it, each later one becomes
``<name> (<its id>)``, which is unique and still says which tenant it was.
"""
from peewee import *


def up(migrator, db):
    rows = db.execute_sql("SELECT id, name FROM tenant ORDER BY created_at, id").fetchall()
    seen = set()
    for tenant_id, name in rows:
        if name.lower() in seen:
            db.execute_sql(f"UPDATE tenant SET name = {db.param} WHERE id = {db.param}",
                           (f"{name} ({tenant_id})", tenant_id))
        seen.add(name.lower())
    db.execute_sql("CREATE UNIQUE INDEX tenant_name_unique ON tenant (LOWER(name))")
