"""Every sealed column's values brought under the sealing key of ``SECRETS_KEY``: what ``flask
secrets rotate-key`` and migrations 0016 and 0027 run.

Secret columns (``SEALED``) are sealed whole; URL columns (``SEALED_URLS``) only where the URL
carries a password (``fields.SealedUrlField``): one in the clear without one stays as it is.

Row by row, each value compared-and-set (``WHERE id = … AND column = <the value read>``): a
secret rotated through the API meanwhile is never overwritten with the old one, and nothing is
locked for longer than one row's update, so the service keeps running while it goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import peewee

from webhooks.sealing import PREFIX, Keyring, SealError
from webhooks.secrecy import has_password

#: The sealed columns, per table: migration 0016 names them as they were then; ``SEALED``
#: is the list of today (destination credentials join it).
SEALED: tuple[tuple[str, tuple[str, ...]], ...] = (("endpoint", ("secret", "previous_secret")),)
#: The destination URL columns: sealed when they carry a password (migration 0027).
SEALED_URLS: tuple[tuple[str, tuple[str, ...]], ...] = (("endpoint", ("url", "fallback_url")),)

#: Rows read per statement.
BATCH = 500


@dataclass
class Resealed:
    """What a pass did: values sealed anew, values already under the sealing key, values changed
    by someone else meanwhile (sealed by them, with their keys)."""

    resealed: int = 0
    current: int = 0
    changed_meanwhile: int = 0


def reseal(db: peewee.Database, ring: Keyring, sealed: Sequence[tuple[str, Sequence[str]]] = SEALED,
           urls: Sequence[tuple[str, Sequence[str]]] = SEALED_URLS) -> Resealed:
    """Seal every value of the ``sealed`` columns (clear ones too) and every URL of the ``urls``
    columns that carries a password under ``ring``'s sealing key; SealError (naming the row,
    never a secret) when one does not open."""
    done = Resealed()
    for columns_of, needs_seal in ((sealed, _always), (urls, _sealed_or_with_password)):
        for table, columns in columns_of:
            for column in columns:
                _reseal_column(db, ring, table, column, done, needs_seal)
    return done


def _always(_stored: str) -> bool:
    return True


def _sealed_or_with_password(stored: str) -> bool:
    return stored.startswith(PREFIX) or has_password(stored)


def _reseal_column(db: peewee.Database, ring: Keyring, table: str, column: str, done: Resealed,
                   needs_seal: Callable[[str], bool]) -> None:
    p = db.param
    select = (f'SELECT "id", "{column}" FROM "{table}" WHERE "id" > {p} AND "{column}" IS NOT NULL '
              f'ORDER BY "id" LIMIT {BATCH}')
    update = f'UPDATE "{table}" SET "{column}" = {p} WHERE "id" = {p} AND "{column}" = {p}'
    after = ""
    while rows := db.execute_sql(select, [after]).fetchall():
        for row_id, stored in rows:
            if not needs_seal(stored):
                continue  # a URL without a password: in the clear, as stored
            if ring.is_current(stored):
                done.current += 1
                continue
            try:
                fresh = ring.seal(ring.open(stored))
            except SealError as error:
                raise SealError(f"{table} {row_id} ({column}): {error}") from None
            if db.execute_sql(update, [fresh, row_id, stored]).rowcount:
                done.resealed += 1
            else:
                done.changed_meanwhile += 1
        after = rows[-1][0]
