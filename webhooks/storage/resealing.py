"""Every sealed column's values brought under the sealing key of ``SECRETS_KEY``: what ``flask
secrets rotate-key`` and migration 0016 run.

Row by row, each value compared-and-set (``WHERE id = … AND column = <the value read>``): a
secret rotated through the API meanwhile is never overwritten with the old one, and nothing is
locked for longer than one row's update, so the service keeps running while it goes on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import peewee

from webhooks.sealing import Keyring, SealError

#: The sealed columns, per table: migration 0016 names them as they were then; ``SEALED``
#: is the list of today (destination credentials join it).
SEALED: tuple[tuple[str, tuple[str, ...]], ...] = (("endpoint", ("secret", "previous_secret")),)

#: Rows read per statement.
BATCH = 500


@dataclass
class Resealed:
    """What a pass did: values sealed anew, values already under the sealing key, values changed
    by someone else meanwhile (sealed by them, with their keys)."""

    resealed: int = 0
    current: int = 0
    changed_meanwhile: int = 0


def reseal(db: peewee.Database, ring: Keyring, sealed: Sequence[tuple[str, Sequence[str]]] = SEALED) -> Resealed:
    """Seal every value of the ``sealed`` columns under ``ring``'s sealing key (clear ones too);
    SealError (naming the row, never a secret) when one does not open."""
    done = Resealed()
    for table, columns in sealed:
        for column in columns:
            _reseal_column(db, ring, table, column, done)
    return done


def _reseal_column(db: peewee.Database, ring: Keyring, table: str, column: str, done: Resealed) -> None:
    p = db.param
    select = (f'SELECT "id", "{column}" FROM "{table}" WHERE "id" > {p} AND "{column}" IS NOT NULL '
              f'ORDER BY "id" LIMIT {BATCH}')
    update = f'UPDATE "{table}" SET "{column}" = {p} WHERE "id" = {p} AND "{column}" = {p}'
    after = ""
    while rows := db.execute_sql(select, [after]).fetchall():
        for row_id, stored in rows:
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
