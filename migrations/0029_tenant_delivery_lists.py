"""A tenant's deliveries, newest first (``GET /v1/deliveries``, the console, the portal), are read off an
index in page order, however quiet the tenant is.

With only ``delivery (tenant_id)``, PostgreSQL read the primary key backwards until it had found a page
of the tenant's rows: for a tenant whose last deliveries were older than everyone else's, 467 ms at
2,000,000 deliveries, and growing with the table.

- ``delivery (tenant_id, id)`` replaces ``delivery (tenant_id)`` (which served only lookups it serves too,
  the tenant's cascade included). Neither column ever changes, so an attempt writes it no more than the
  index it replaces.
- ``delivery (tenant_id, id) WHERE status = 'failed'`` serves ``?status=failed``, what support looks for
  first, without reading a busy tenant's delivered ones. It holds failed deliveries only: written when
  one fails (or is resent), not on every attempt.
"""


def up(migrator, db):
    db.execute_sql('CREATE INDEX "delivery_tenant_id_id" ON "delivery" ("tenant_id", "id")')
    db.execute_sql('CREATE INDEX "delivery_tenant_failed" ON "delivery" ("tenant_id", "id") WHERE "status" = \'failed\'')
    db.execute_sql('DROP INDEX "delivery_tenant_id"')
