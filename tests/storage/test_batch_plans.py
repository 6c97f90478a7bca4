"""A batch's statements find its deliveries by primary key, whatever the statistics say.

The lease and the spill join a batch of ids (``v``) to the deliveries. Written as a plain
``status IN ('pending', 'retrying')``, their "still waiting" test let PostgreSQL scan every
delivery whose status index entry said pending, dead versions included, and hash-join the
batch to them whenever the statistics said few were pending, as they do once a drain has
been analysed: the cost of a batch then grew with the backlog."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from webhooks.ingest.accept import store_event
from webhooks.storage import delivery_sql
from webhooks.storage.db import database
from webhooks.storage.ids import new_id
from webhooks.storage.models import Delivery, Endpoint, Tenant
from webhooks.delivery.signing import generate_secret

from tests.api_helpers import HOOK_URL

#: Deliveries in the table, and how many of them wait again after the statistics were taken.
STORED, WAITING = 2000, 300


def _plan(sql: str, params: list[object]) -> str:
    with database.atomic() as transaction:
        rows = database.execute_sql(f"EXPLAIN {sql}", params).fetchall()
        transaction.rollback()
    return "\n".join(row[0] for row in rows)


@pytest.fixture
def waiting_ids(tenant: SimpleNamespace) -> list[str]:
    """``WAITING`` pending deliveries, in a table whose statistics say none is."""
    Endpoint.create(id=new_id("ep"), tenant=tenant.id, url=HOOK_URL, secret=generate_secret())
    model = Tenant.get_by_id(tenant.id)
    for n in range(STORED):
        store_event(model, "order.created", {"n": n}, None)
    Delivery.update(status="delivered", attempts=1).execute()
    database.execute_sql("ANALYZE delivery")
    ids = [row.id for row in Delivery.select(Delivery.id).order_by(Delivery.id).limit(WAITING)]
    Delivery.update(status="pending", attempts=0).where(Delivery.id.in_(ids)).execute()
    return ids[:128]


@pytest.mark.postgresql  # the planner's choice; SQLite has one way to run these
def test_the_lease_of_a_batch_reads_its_rows_by_primary_key(waiting_ids: list[str]) -> None:
    params: list[object] = [value for delivery_id in waiting_ids for value in (delivery_id, 0)]
    plan = _plan(delivery_sql.lease_sql(len(waiting_ids)), params + ["2026-01-01 00:05:00", "2026-01-01 00:00:00"])

    assert "delivery_status" not in plan, plan
    assert "Index Scan using delivery_pkey on delivery " in plan, plan


@pytest.mark.postgresql  # the planner's choice; SQLite has one way to run these
def test_the_spill_of_a_batch_never_scans_the_waiting_by_status(waiting_ids: list[str]) -> None:
    params: list[object] = [value for delivery_id in waiting_ids for value in (delivery_id, 0)]
    plan = _plan(delivery_sql.spill_sql(len(waiting_ids)), params + ["2026-01-01 00:00:00"])

    assert "delivery_status" not in plan, plan  # on a table this small a sequential scan may win: fine
