"""How often one may try to log in: per account and per client address, in every web process.

Each attempt is counted before the password is checked, in one database transaction (an upsert
per key), so parallel guessers cannot slip past the count between two processes or threads.
Beyond the limit an attempt is refused at once with the seconds until its window ends: no
password hash is computed and no web thread sleeps. A successful login clears its account's
count and gives the address its attempt back.

Counting takes the database's write lock (SQLite) or the key's row lock (PostgreSQL), and a
thread waiting for it is a thread the API does not get. So each web process also checks at most
``CONCURRENT_LOGINS`` logins at a time; a login beyond them is refused at once (429,
``Retry-After: 1``) without touching the database: parallel guessers hold at most that many of a
process's threads, whatever their number.

The per-account limit also lets someone lock a known account out for one window by guessing;
that is the price of stopping slow guessing from many addresses. An administrator can clear an
account's count with ``flask staff unlock``.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

import peewee

from webhooks.console.models import LoginThrottle
from webhooks.storage.db import retrying, write

#: Attempts allowed per window for one account (whatever address it comes from).
ACCOUNT_LIMIT = 5

#: Attempts allowed per window from one client address (whatever accounts they name).
ADDRESS_LIMIT = 20

#: The window both limits count in; a refused client may try again when it ends.
WINDOW = timedelta(minutes=15)

#: Logins one web process checks at a time (of its ``WEB_THREADS``).
CONCURRENT_LOGINS = 2

_login_slots = threading.BoundedSemaphore(CONCURRENT_LOGINS)


@dataclass(frozen=True)
class Refusal:
    """An attempt over a limit: which one (``account``, ``address`` or ``busy``), and when to try again."""

    limit: str
    retry_after: int

    def __str__(self) -> str:
        if self.limit == "busy":
            return "Too many logins are being checked at this moment. Try again in a second."
        minutes = max(1, math.ceil(self.retry_after / 60))
        whose = "for this account" if self.limit == "account" else "from your network address"
        return (f"Too many login attempts {whose}. Wait {minutes} minute{'s' if minutes != 1 else ''} "
                "and try again, or ask an administrator to reset your password.")


#: The refusal of a login beyond ``CONCURRENT_LOGINS``.
BUSY = Refusal("busy", 1)


@contextmanager
def login_slot() -> Iterator[bool]:
    """One of this process's ``CONCURRENT_LOGINS`` login slots for the block (False: none free)."""
    taken = _login_slots.acquire(blocking=False)
    try:
        yield taken
    finally:
        if taken:
            _login_slots.release()


def key_of(kind: str, value: str) -> str:
    return f"{kind}:{hashlib.sha256(value.encode()).hexdigest()}"


def _count(key: str, now: datetime) -> LoginThrottle:
    """Add one attempt to ``key``'s window (a new window if the last one ended); the row after it."""
    expired = LoginThrottle.window_started_at <= now - WINDOW
    LoginThrottle.insert(key=key, attempts=1, window_started_at=now).on_conflict(
        conflict_target=[LoginThrottle.key],
        update={
            LoginThrottle.attempts: peewee.Case(None, [(expired, 1)], LoginThrottle.attempts + 1),
            LoginThrottle.window_started_at: peewee.Case(None, [(expired, now)], LoginThrottle.window_started_at),
        },
    ).execute()
    return LoginThrottle.get_by_id(key)


#: Attempts allowed per window, by the kind of key.
LIMITS = {"account": ACCOUNT_LIMIT, "address": ADDRESS_LIMIT}


def _refusals(rows: list[LoginThrottle], now: datetime, *, counted: bool) -> list[Refusal]:
    """The limits ``rows`` are past in a window not ended yet; ``counted``: the rows include this attempt."""
    found = []
    for row in rows:
        kind = row.key.partition(":")[0]
        ends = row.window_started_at + WINDOW
        attempts = row.attempts if counted else row.attempts + 1
        if attempts > LIMITS[kind] and ends > now:
            found.append(Refusal(kind, max(1, math.ceil((ends - now).total_seconds()))))
    return found


@retrying
def take_attempt(email: str, address: str, now: datetime) -> Refusal | None:
    """Count a login attempt for ``email`` from ``address``; a Refusal if either is past its limit.

    A key already at its limit is refused on a read, with no write and no lock: a flood of
    refused guesses costs the database next to nothing. Below it, the count is taken in a write
    transaction and looked at again, so parallel attempts never get past the limit between them."""
    keys = [key_of("account", email), key_of("address", address)]
    refusals = _refusals(list(LoginThrottle.select().where(LoginThrottle.key.in_(keys))), now, counted=False)
    if not refusals:
        with write():
            refusals = _refusals([_count(key, now) for key in keys], now, counted=True)
    return max(refusals, key=lambda refusal: refusal.retry_after, default=None)


@retrying
def forgive(email: str, address: str, now: datetime) -> None:
    """After a successful login: the account starts afresh, the address gets its attempt back,
    and rows whose window ended are dropped (not while guessers are counted: a login is rare)."""
    LoginThrottle.delete().where(LoginThrottle.window_started_at <= now - WINDOW).execute()
    with write():
        LoginThrottle.delete().where(LoginThrottle.key == key_of("account", email)).execute()
        LoginThrottle.update(attempts=LoginThrottle.attempts - 1).where(
            (LoginThrottle.key == key_of("address", address)) & (LoginThrottle.attempts > 0)
        ).execute()


@retrying
def unlock(email: str) -> None:
    """Clear an account's count (``flask staff unlock``)."""
    LoginThrottle.delete().where(LoginThrottle.key == key_of("account", email)).execute()
