"""The tables the worker writes on every attempt carry only the indexes something reads.

Each attempt inserts an attempt row and updates its delivery twice; every index is one more
entry written each time, on both databases (migration 0013)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.delivery.claim_helpers import LEASE, delivered_outcome, messages_of
from webhooks.delivery.claims import claim_many
from webhooks.delivery.records import record_many
from webhooks.storage.db import database
from webhooks.storage.models import Attempt, Delivery, Endpoint, Event, Tenant


def _indexes(table: str) -> dict[str, tuple[str, ...]]:
    with database.connection_context():
        return {index.name: tuple(index.columns) for index in database.get_indexes(table)}


def test_no_index_on_the_hot_tables_is_the_first_columns_of_another(database_url: str) -> None:
    for table in ("delivery", "attempt"):
        indexes = _indexes(table)
        for name, columns in indexes.items():
            longer = [other for other, cols in indexes.items() if other != name and cols[: len(columns)] == columns
                      and len(cols) > len(columns)]
            assert not longer, f"{table}.{name} {columns} is the start of {longer}"


def test_the_lease_touches_no_indexed_column_so_it_can_be_a_heap_only_update(database_url: str) -> None:
    indexed = {column for columns in _indexes("delivery").values() for column in columns}
    assert "lease_until" not in indexed
    assert {"status", "endpoint_id", "created_at"} <= indexed  # the ladder's and the release's lookups remain


@pytest.mark.postgresql  # SQLite keeps its foreign keys (migration 0014)
def test_an_attempt_row_checks_the_foreign_key_of_its_delivery_only(database_url: str) -> None:
    with database.connection_context():
        checked = {key.column for key in database.get_foreign_keys("attempt")}
    assert checked == {"delivery_id"}
    assert "attempt_tenant_id" not in _indexes("attempt")


def test_deleting_an_event_an_endpoint_or_a_tenant_takes_its_attempts_with_it(tenant: SimpleNamespace) -> None:
    messages = messages_of(tenant, 2) + messages_of(tenant, 2)  # two endpoints
    claim_many(messages, LEASE)
    assert record_many([(m, delivered_outcome(m)) for m in messages], offline_after=5) == [True] * 4

    def left() -> set[str]:
        return {attempt.delivery_id for attempt in Attempt.select()}

    Event.delete().where(Event.id == messages[0].event_id).execute()
    assert left() == {m.delivery_id for m in messages if m.event_id != messages[0].event_id}
    Endpoint.delete().where(Endpoint.id == messages[1].endpoint_id).execute()
    assert left() == {m.delivery_id for m in messages if m.endpoint_id != messages[1].endpoint_id}
    Tenant.delete().where(Tenant.id == tenant.id).execute()
    assert left() == set()
    assert Delivery.select().count() == 0


@pytest.mark.postgresql  # the planner it is for (SQLite runs the same migration)
def test_a_tenant_s_deliveries_are_listed_off_an_index_in_page_order_and_its_failed_ones_off_their_own(
    database_url: str,
) -> None:
    # With (tenant_id) alone, PostgreSQL read the primary key backwards until it had a page of the tenant's:
    # 467 ms for a quiet tenant among 2,000,000 deliveries (migration 0029).
    with database.connection_context():
        indexes = {index.name: index for index in database.get_indexes("delivery")}

    assert tuple(indexes["delivery_tenant_id_id"].columns) == ("tenant_id", "id")
    failed = indexes["delivery_tenant_failed"]
    assert tuple(failed.columns) == ("tenant_id", "id") and "'failed'" in failed.sql
    assert "delivery_tenant_id" not in indexes
