"""Tenant API keys ``<key_id>.<secret>``: only a SHA-256 of the secret is stored.

A fast hash is enough (the secret has 256 random bits) and a password hash would
cost milliseconds on every request; comparison is constant-time.

Every /v1 request authenticates, so each process remembers a verified key for
``KEY_CACHE_SECONDS`` (``API_KEY_CACHE_SECONDS``, default 5 s; 0 turns the cache off):
the key id, the stored hash and the tenant row, never the secret itself. The secret
presented is still hashed and compared on every request, so a wrong secret for a cached
key id is refused at once. The price: a key revoked (or rotated) in another process keeps
working in this one for at most that long. A revocation made in this process
(``revoke_api_keys``) forgets the tenant's keys here immediately. Unknown and revoked
keys are never cached, so guessing costs a database lookup each time.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from webhooks.ids import has_prefix, new_id
from webhooks.models import ApiKey, Tenant
from webhooks.timeutil import utcnow

#: How long a verified key is trusted without asking the database (seconds).
KEY_CACHE_SECONDS = float(os.environ.get("API_KEY_CACHE_SECONDS", "5"))

#: Keys remembered per process at most; the cache is emptied when it is full.
KEY_CACHE_SIZE = 10_000


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class _Entry:
    secret_hash: str
    tenant_data: dict[str, Any]
    expires: float


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
            with self._lock:
                self._entries.pop(key_id, None)
            return None
        return entry

    def put(self, key_id: str, secret_hash: str, tenant: Tenant) -> None:
        if self.ttl <= 0:
            return
        entry = _Entry(secret_hash, dict(tenant.__data__), self.clock() + self.ttl)
        with self._lock:
            if len(self._entries) >= self.size:
                self._entries.clear()
            self._entries[key_id] = entry

    def forget_tenant(self, tenant_id: str) -> None:
        with self._lock:
            for key_id in [k for k, e in self._entries.items() if e.tenant_data.get("id") == tenant_id]:
                del self._entries[key_id]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


#: This process's cache (gunicorn workers each have their own, filled after the fork).
key_cache = KeyCache()


def create_api_key(tenant: Tenant) -> str:
    """Store a new key for ``tenant`` and return it whole (the only time it is readable)."""
    key_id = new_id("key")
    secret = secrets.token_urlsafe(32)
    ApiKey.create(id=key_id, tenant=tenant, secret_hash=_digest(secret))
    return f"{key_id}.{secret}"


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


def _tenant_from(data: dict[str, Any]) -> Tenant:
    """A fresh Tenant instance per request, so no request sees another's changes to it."""
    tenant = Tenant(__no_default__=True)
    tenant.__data__ = dict(data)
    return tenant


def authenticate(raw_key: str) -> Tenant | None:
    """The tenant owning ``raw_key``, or None for a malformed, unknown or revoked key."""
    key_id, _, secret = raw_key.partition(".")
    if not secret or not has_prefix(key_id, "key"):
        return None
    digest = _digest(secret)
    cached = key_cache.get(key_id)
    if cached is not None:
        return _tenant_from(cached.tenant_data) if hmac.compare_digest(cached.secret_hash, digest) else None
    row = (
        ApiKey.select(ApiKey, Tenant)
        .join(Tenant)
        .where((ApiKey.id == key_id) & ApiKey.revoked_at.is_null())
        .first()
    )
    if row is None or not hmac.compare_digest(row.secret_hash, digest):
        return None
    key_cache.put(key_id, row.secret_hash, row.tenant)
    return row.tenant
