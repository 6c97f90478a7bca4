"""Hot-path statements as SQL text built once per shape, with peewee's own value conversion.

peewee builds SQL from its expression tree anew for every query; on the worker's hot
path (an UPDATE and an INSERT per attempt) that was a fifth of the process's CPU. The
statements here are the same ones peewee would send, rendered once per model, column
list and row count, and cached. Values still pass through each field's ``db_value``
(foreign keys, JSON), so what lands in the database is what peewee would have written.
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

import peewee

from webhooks.storage.db import database, is_postgres


def _param() -> str:
    return database.obj.param  # "%s" for psycopg2, "?" for sqlite3


def table(model: type[peewee.Model]) -> str:
    """The model's table name, quoted."""
    return f'"{model._meta.table_name}"'


def _column(model: type[peewee.Model], name: str) -> str:
    return f'"{model._meta.fields[name].column_name}"'


def columns(model: type[peewee.Model], names: Sequence[str]) -> str:
    """The quoted column names of these fields, comma-separated."""
    return ", ".join(_column(model, name) for name in names)


def value_rows(count: int, width: int, param: str) -> str:
    """``(p, p, …), (p, p, …)``: ``count`` rows of ``width`` placeholders."""
    row = "(" + ", ".join([param] * width) + ")"
    return ", ".join([row] * count)


@lru_cache(maxsize=256)
def insert_sql(model: type[peewee.Model], names: tuple[str, ...], rows: int, param: str) -> str:
    """``INSERT INTO model (names) VALUES (…), …`` for ``rows`` rows, with ``param`` placeholders."""
    return f"INSERT INTO {table(model)} ({columns(model, names)}) VALUES {value_rows(rows, len(names), param)}"


#: From this many rows, an insert on PostgreSQL goes as ``COPY … FROM STDIN``.
#: PostgreSQL parses and plans a multi-row ``INSERT … VALUES`` of 128 attempt rows (2,300
#: parameters) anew each time: 35-37 us of its CPU per row against 20-22 us for the same rows
#: copied (``bench/RESULTS-archive.md``, 2026-11-26 03:52–07:08 UTC, commit 17b94a9). A copy
#: takes one round trip more, so the few rows of a quiet moment keep the ``INSERT``.
COPY_FROM_ROWS = 16


def insert_rows(model: type[peewee.Model], rows: Sequence[Mapping[str, Any]]) -> None:
    """``model.insert_many(rows)``: one multi-row INSERT (a COPY for many rows on PostgreSQL);
    every row has the same field names. A constraint broken raises ``peewee.IntegrityError`` either way."""
    if not rows:
        return
    names = tuple(rows[0])
    if len(rows) >= COPY_FROM_ROWS and is_postgres():
        database.copy_in(f"COPY {table(model)} ({columns(model, names)}) FROM STDIN", _copy_rows_text(model, names, rows))
        return
    fields = [model._meta.fields[name] for name in names]
    params = [field.db_value(row[name]) for row in rows for name, field in zip(names, fields)]
    database.execute_sql(insert_sql(model, names, len(rows), _param()), params)


def _copy_rows_text(model: type[peewee.Model], names: tuple[str, ...], rows: Sequence[Mapping[str, Any]]) -> str:
    """``rows`` (the fields ``names`` of each) as ``COPY … FROM STDIN`` input: a line per row."""
    converters = tuple(zip(names, _copy_converters(model, names)))
    return "".join("\t".join([text(row[name]) for name, text in converters]) + "\n" for row in rows)


@lru_cache(maxsize=64)
def _copy_converters(model: type[peewee.Model], names: tuple[str, ...]) -> tuple[Callable[[Any], str], ...]:
    return tuple(_copy_converter(model._meta.fields[name]) for name in names)


def _copy_converter(field: peewee.Field) -> Callable[[Any], str]:
    """One field's value to ``COPY`` text: ``db_value``, then ``_copy_text``. A foreign key given
    as its key's text (what the hot path passes) skips peewee's ``db_value`` (0.2 us each, four
    an attempt row)."""
    db_value = field.db_value
    if isinstance(field, peewee.ForeignKeyField) and isinstance(field.rel_field, peewee.CharField):
        return lambda value: _copy_text(value if type(value) is str else db_value(value))
    return lambda value: _copy_text(db_value(value))


#: COPY's text format: a backslash, tab, newline or carriage return inside a value is escaped.
_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _copy_text(value: Any) -> str:
    """A database value (after ``db_value``) in ``COPY``'s text format; ``\\N`` is NULL."""
    if value is None:
        return "\\N"
    if isinstance(value, str):
        # Most values need no escape: four scans in C cost less than one ``translate``.
        if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
            return value.translate(_COPY_ESCAPES)
        return value
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    raise TypeError(f"no COPY text for a {type(value).__name__}")


@lru_cache(maxsize=512)
def _select_in_sql(
    model: type[peewee.Model], names: tuple[str, ...], key: str, count: int, order: bool, lock: bool, param: str
) -> str:
    selected = columns(model, names) if names else "*"
    sql = (
        f"SELECT {selected} FROM {table(model)} "
        f"WHERE {_column(model, key)} IN ({', '.join([param] * count)})"
    )
    if order:
        sql += f" ORDER BY {_column(model, key)}"
    if lock:
        # The row lock of ``db.locking``: it must not block inserts that reference the row.
        sql += " FOR NO KEY UPDATE"
    return sql


def rows_in(model: type[peewee.Model], names: Sequence[str], key: str, values: Sequence[Any]) -> list[tuple[Any, ...]]:
    """``model.select(*names).where(key in values).tuples()``, each value converted by its field."""
    if not values:
        return []
    fields = [model._meta.fields[name] for name in names]
    sql = _select_in_sql(model, tuple(names), key, len(values), False, False, _param())
    cursor = database.execute_sql(sql, [model._meta.fields[key].db_value(value) for value in values])
    return [tuple(field.python_value(value) for field, value in zip(fields, row)) for row in cursor.fetchall()]


def models_in(model: type[peewee.Model], key: str, values: Sequence[Any], lock: bool = False) -> list[peewee.Model]:
    """Whole rows whose ``key`` is in ``values``, ordered by it; with ``lock``, locked as ``db.locking`` does."""
    if not values:
        return []
    from webhooks.storage.db import is_postgres

    sql = _select_in_sql(model, (), key, len(values), True, lock and is_postgres(), _param())
    key_field = model._meta.fields[key]
    return list(model.raw(sql, *[key_field.db_value(value) for value in sorted(values)]))


@lru_cache(maxsize=256)
def values_cte(name: str, names: tuple[str, ...], casts: tuple[str, ...] | None, rows: int, param: str) -> str:
    """``WITH name(a, b) AS (VALUES (p, p), …)``: rows of parameters as a table to join against.

    ``casts`` (PostgreSQL only) types each column, so that a column of NULLs is not text.
    """
    cells = [f"{param}::{cast}" for cast in casts] if casts else [param] * len(names)
    row = "(" + ", ".join(cells) + ")"
    return f"WITH {name}({', '.join(names)}) AS (VALUES {', '.join([row] * rows)})"
