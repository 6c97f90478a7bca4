"""How often one may try to log in: per account and per client address, in every web process.

Each attempt is counted before the password is checked, in one database transaction (an upsert
per key), so parallel guessers cannot slip past the count between two processes or threads.
Beyond the limit an attempt is refused at once with the seconds until its window ends: no
password hash is computed and no web thread sleeps. A successful login clears its account's
count and gives the address its attempt back.

The per-account limit also lets someone lock a known account out for one window by guessing;
that is the price of stopping slow guessing from many addresses. An administrator can clear an
account's count with ``flask staff unlock``.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

import peewee

from webhooks.console.models import LoginThrottle
from webhooks.storage.db import retrying, write

#: Attempts allowed per window for one account (whatever address they come from).
ACCOUNT_LIMIT = 5

#: Attempts allowed per window from one client address (whatever accounts they name).
ADDRESS_LIMIT = 20

#: The window both limits count in; a refused client may try again when it ends.
WINDOW = timedelta(minutes=15)


@dataclass(frozen=True)
class Refusal:
    """An attempt over a limit: which one (``account`` or ``address``), and when to try again."""

    limit: str
    retry_after: int

    def __str__(self) -> str:
        minutes = max(1, math.ceil(self.retry_after / 60))
        whose = "for this account" if self.limit == "account" else "from your network address"
        return (f"Too many login attempts {whose}. Wait {minutes} minute{'s' if minutes != 1 else ''} "
                "and try again, or ask an administrator to reset your password.")


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


@retrying
def take_attempt(email: str, address: str, now: datetime) -> Refusal | None:
    """Count a login attempt for ``email`` from ``address``; a Refusal if either is past its limit."""
    refusals = []
    with write():
        for kind, value, limit in (("account", email, ACCOUNT_LIMIT), ("address", address, ADDRESS_LIMIT)):
            row = _count(key_of(kind, value), now)
            if row.attempts > limit:
                ends = row.window_started_at + WINDOW
                refusals.append(Refusal(kind, max(1, math.ceil((ends - now).total_seconds()))))
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
