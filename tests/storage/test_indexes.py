"""The tables the worker writes on every attempt carry only the indexes something reads.

Each attempt inserts an attempt row and updates its delivery twice; every index is one more
entry written each time, on both databases (migration 0013)."""

from __future__ import annotations

from webhooks.storage.db import database


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
