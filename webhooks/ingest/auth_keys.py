"""API keys ``<key_id>.<secret>``, a tenant's or the platform's: only a SHA-256 of the secret is stored.

One mechanism for both owners: a key's ``tenant`` is its tenant, or None for a platform key
(``flask platform create-key``, for ``/v1/tenants…``). Every function below that takes an
``owner`` takes a Tenant or ``PLATFORM``; listing, revoking, rotating, the cache and
``last_used_at`` are the same for both.

A fast hash is enough (the secret has 256 random bits) and a password hash would
cost milliseconds on every request; comparison is constant-time.

A tenant holds any number of named keys. Rotating one issues a new key and lets the old
one expire by itself after an overlap (``expires_at``), so clients can switch without
downtime; revoking one stops it at once.

Every /v1 request authenticates, so each process remembers a verified key for
``KEY_CACHE_SECONDS`` (``API_KEY_CACHE_SECONDS``, default 5 s; 0 turns the cache off):
the key id, the stored hash, its expiry and the tenant row, never the secret itself. The
secret presented is still hashed and compared on every request, and the expiry checked,
so a wrong secret or an expired key is refused at once. The price: a key revoked in
another process keeps working in this one for at most that long. A revocation or
rotation made in this process forgets the keys here immediately. Unknown, revoked and
expired keys are never cached, so guessing costs a database lookup each time.

When a key was last used is written at most once per ``LAST_USED_INTERVAL`` per key and
process (and the row only when its value is older than that), never once per request.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable, Mapping, Optional

import peewee

from webhooks.errors import NotFound
from webhooks.storage.ids import has_prefix, new_id
from webhooks.storage.models import ApiKey, Tenant
from webhooks.storage.timeutil import isoformat, utcnow

log = logging.getLogger(__name__)

def key_cache_seconds(environ: Mapping[str, str]) -> float:
    """How long a verified key is trusted without asking the database (``API_KEY_CACHE_SECONDS``, 5 s)."""
    return float(environ.get("API_KEY_CACHE_SECONDS", "5"))


#: How long a verified key is trusted without asking the database (seconds).
KEY_CACHE_SECONDS = key_cache_seconds(os.environ)

#: Keys remembered per process at most; the cache is emptied when it is full.
KEY_CACHE_SIZE = 10_000

#: A key's ``last_used_at`` is written at most this often (seconds), per key and process.
LAST_USED_INTERVAL = 60.0

#: The name of a tenant's first key.
DEFAULT_KEY_NAME = "default"

#: The owner of a platform key (an ``ApiKey`` with no tenant).
PLATFORM = None

#: Who holds keys: a tenant, or ``PLATFORM``.
Owner = Optional[Tenant]


@dataclass(frozen=True)
class KeyHolder:
    """Who a verified key speaks for: ``tenant``, or the platform when it is None."""

    key_id: str
    tenant: Tenant | None

    @property
    def is_platform(self) -> bool:
        return self.tenant is None


class KeyNotFound(NotFound):
    """No live key of that id for this tenant (unknown, another tenant's, revoked or expired)."""


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class _Entry:
    secret_hash: str
    #: The tenant row's columns; None for a platform key.
    tenant_data: dict[str, Any] | None
    expires: float
    #: The key's own expiry (a rotated key's overlap), checked on every use.
    key_expires_at: datetime | None = None


class KeyCache:
    """Verified keys of this process: ``key_id -> (stored hash, tenant row)`` until they expire."""

    def __init__(self, ttl: float = KEY_CACHE_SECONDS, size: int = KEY_CACHE_SIZE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl, self.size, self.clock = ttl, size, clock
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def get(self, key_id: str) -> _Entry | None:
        entry = self._entries.get(key_id)
        if entry is None:
            return None
        if entry.expires <= self.clock():
            self.forget(key_id)
            return None
        return entry

    def put(self, key_id: str, secret_hash: str, tenant: Owner, key_expires_at: datetime | None = None) -> None:
        if self.ttl <= 0:
            return
        data = None if tenant is None else dict(tenant.__data__)
        entry = _Entry(secret_hash, data, self.clock() + self.ttl, key_expires_at)
        with self._lock:
            if len(self._entries) >= self.size:
                self._entries.clear()
            self._entries[key_id] = entry

    def forget(self, *key_ids: str) -> None:
        with self._lock:
            for key_id in key_ids:
                self._entries.pop(key_id, None)

    def forget_tenant(self, tenant_id: str) -> None:
        with self._lock:
            for key_id in [k for k, e in self._entries.items() if (e.tenant_data or {}).get("id") == tenant_id]:
                del self._entries[key_id]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


class LastUsed:
    """When this process last wrote each key's ``last_used_at``: ``due(key_id)`` once per interval."""

    def __init__(self, interval: float = LAST_USED_INTERVAL, size: int = KEY_CACHE_SIZE,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.interval, self.size, self.clock = interval, size, clock
        self._written: dict[str, float] = {}
        self._lock = threading.Lock()

    def due(self, key_id: str) -> bool:
        now = self.clock()
        with self._lock:
            last = self._written.get(key_id)
            if last is not None and now - last < self.interval:
                return False
            if len(self._written) >= self.size:
                self._written.clear()
            self._written[key_id] = now
            return True


#: This process's cache (gunicorn workers each have their own, filled after the fork).
key_cache = KeyCache()

#: This process's record of ``last_used_at`` writes.
last_used = LastUsed()


def _live(now: datetime) -> Any:
    """The condition of a key that authenticates: not revoked, not expired."""
    return ApiKey.revoked_at.is_null() & (ApiKey.expires_at.is_null() | (ApiKey.expires_at > now))


def _owned_by(owner: Owner) -> Any:
    """The condition of a key held by ``owner`` (a tenant, or ``PLATFORM``)."""
    return ApiKey.tenant.is_null() if owner is None else ApiKey.tenant == owner.id


def create_api_key(owner: Owner, name: str = DEFAULT_KEY_NAME) -> tuple[ApiKey, str]:
    """Store a new key for ``owner``; returns its row and the key whole (the only time it is readable)."""
    key_id = new_id("key")
    secret = secrets.token_urlsafe(32)
    row = ApiKey.create(id=key_id, tenant=owner, name=name, secret_hash=_digest(secret))
    return row, f"{key_id}.{secret}"


def live_keys(owner: Owner) -> list[ApiKey]:
    """The owner's keys that authenticate now (expiring ones included), oldest first."""
    return list(ApiKey.select().where(_owned_by(owner) & _live(utcnow())).order_by(ApiKey.created_at, ApiKey.id))


def live_key_counts() -> list[tuple[str, int]]:
    """``(tenant id, how many keys authenticate now)`` for every tenant that has any."""
    query = (ApiKey.select(ApiKey.tenant, peewee.fn.COUNT(ApiKey.id))
             .where(ApiKey.tenant.is_null(False) & _live(utcnow())).group_by(ApiKey.tenant))
    return list(query.tuples())


def live_key(owner: Owner, key_id: str) -> ApiKey:
    """One of the owner's live keys, or ``KeyNotFound``."""
    row = None
    if has_prefix(key_id, "key"):
        row = ApiKey.get_or_none((ApiKey.id == key_id) & _owned_by(owner) & _live(utcnow()))
    if row is None:
        raise KeyNotFound(f"no live API key {key_id} for {'the platform' if owner is None else 'this tenant'}")
    return row


def revoke_key(owner: Owner, key_id: str) -> ApiKey:
    """Revoke one key at once: this process refuses it now, others within ``KEY_CACHE_SECONDS``."""
    row = live_key(owner, key_id)
    row.revoked_at = utcnow()
    ApiKey.update(revoked_at=row.revoked_at).where(ApiKey.id == row.id).execute()
    key_cache.forget(row.id)
    return row


def revoke_api_keys(tenant: Tenant) -> int:
    """Revoke every live key of ``tenant``; returns how many were revoked.

    This process stops accepting them at once; other processes within ``KEY_CACHE_SECONDS``.
    """
    revoked = (
        ApiKey.update(revoked_at=utcnow())
        .where((ApiKey.tenant == tenant) & ApiKey.revoked_at.is_null())
        .execute()
    )
    key_cache.forget_tenant(tenant.id)
    return revoked


@dataclass
class Rotation:
    new: ApiKey
    api_key: str
    #: The keys replaced: expiring at ``expires_at`` (or revoked, with no overlap).
    old: list[ApiKey]


def rotate_key(owner: Owner, key_id: str | None, overlap: float) -> Rotation:
    """Issue a new key replacing ``key_id`` (every live key when None): the old one keeps working
    for ``overlap`` seconds, then expires by itself; with no overlap it is revoked at once.

    The new key takes the old key's name (``DEFAULT_KEY_NAME`` when several are replaced).
    Call inside a transaction.
    """
    old = [live_key(owner, key_id)] if key_id is not None else live_keys(owner)
    now = utcnow()
    ids = [row.id for row in old]
    if overlap > 0:
        until = now + timedelta(seconds=overlap)
        for row in old:  # an overlap never lengthens a key's life
            row.expires_at = until if row.expires_at is None else min(row.expires_at, until)
            ApiKey.update(expires_at=row.expires_at).where(ApiKey.id == row.id).execute()
    else:
        for row in old:
            row.revoked_at = now
        ApiKey.update(revoked_at=now).where(ApiKey.id.in_(ids)).execute()
    key_cache.forget(*ids)
    names = {row.name for row in old}
    new, api_key = create_api_key(owner, names.pop() if len(names) == 1 else DEFAULT_KEY_NAME)
    return Rotation(new, api_key, old)


def _tenant_from(data: dict[str, Any] | None) -> Tenant | None:
    """A fresh Tenant instance per request, so no request sees another's changes to it."""
    if data is None:
        return None
    tenant = Tenant(__no_default__=True)
    tenant.__data__ = dict(data)
    return tenant


def _touch(key_id: str) -> None:
    """Record that the key was used, at most once per ``LAST_USED_INTERVAL`` (a failure is only logged)."""
    if not last_used.due(key_id):
        return
    now = utcnow()
    stale = now - timedelta(seconds=last_used.interval)
    try:
        (ApiKey.update(last_used_at=now)
         .where((ApiKey.id == key_id) & (ApiKey.last_used_at.is_null() | (ApiKey.last_used_at < stale)))
         .execute())
    except peewee.DatabaseError:  # a busy database must not fail the request it serves
        log.warning("could not record the use of API key %s", key_id, exc_info=True)


def authenticate(raw_key: str) -> Tenant | None:
    """The tenant owning ``raw_key``, or None for a malformed, unknown, revoked or expired key,
    and for a platform key."""
    holder = authenticate_key(raw_key)
    return None if holder is None else holder.tenant


def authenticate_key(raw_key: str) -> KeyHolder | None:
    """Who ``raw_key`` speaks for (a tenant or the platform), or None for a malformed, unknown,
    revoked or expired key, or a key of a deleted tenant."""
    key_id, _, secret = raw_key.partition(".")
    if not secret or not has_prefix(key_id, "key"):
        return None
    digest = _digest(secret)
    cached = key_cache.get(key_id)
    if cached is not None:
        if cached.key_expires_at is not None and cached.key_expires_at <= utcnow():
            key_cache.forget(key_id)
            return None
        if not hmac.compare_digest(cached.secret_hash, digest):
            return None
        _touch(key_id)
        return KeyHolder(key_id, _tenant_from(cached.tenant_data))
    row = (ApiKey.select(ApiKey, Tenant).join(Tenant, peewee.JOIN.LEFT_OUTER)
           .where((ApiKey.id == key_id) & _live(utcnow()) & (ApiKey.tenant.is_null() | Tenant.deleted_at.is_null()))
           .first())
    if row is None or not hmac.compare_digest(row.secret_hash, digest):
        return None
    tenant = row.tenant if row.tenant_id is not None else None
    key_cache.put(key_id, row.secret_hash, tenant, row.expires_at)
    _touch(key_id)
    return KeyHolder(key_id, tenant)


def key_info(row: ApiKey) -> dict[str, str | None]:
    """A key as ``flask tenant keys`` and the API show it (never its secret)."""
    return {"id": row.id, "name": row.name, "created_at": isoformat(row.created_at),
            "last_used_at": isoformat(row.last_used_at), "expires_at": isoformat(row.expires_at)}


def tenant_info(tenant: Tenant) -> dict[str, str]:
    """``{"id", "name"}``: what a command that acts on a tenant prints, so the operator sees which one."""
    return {"id": tenant.id, "name": tenant.name}


def tenant_named(name: str) -> Tenant | None:
    """The live tenant called ``name`` (any case: names are unique whatever their case), if there is one."""
    return Tenant.get_or_none((peewee.fn.LOWER(Tenant.name) == name.strip().lower()) & Tenant.deleted_at.is_null())


def tenant_by_ref(ref: str) -> Tenant | None:
    """The live tenant whose id, else whose ``uid`` (the platform's own id for it), is ``ref``."""
    live = Tenant.deleted_at.is_null()
    if has_prefix(ref, "ten"):
        tenant = Tenant.get_or_none((Tenant.id == ref) & live)
        if tenant is not None:
            return tenant
    return Tenant.get_or_none((Tenant.uid == ref) & live) if 0 < len(ref) <= 64 else None


def find_tenant(id_or_name: str) -> Tenant | None:
    """The tenant a person means by ``id_or_name``: the one with that id or uid, else the one with that name.

    Every command and form that takes a tenant takes any of them (``flask tenant keys acme``)."""
    text = id_or_name.strip()
    return tenant_by_ref(text) or tenant_named(text)
