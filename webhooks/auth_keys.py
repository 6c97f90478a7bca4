"""Tenant API keys ``<key_id>.<secret>``: only a SHA-256 of the secret is stored.

A fast hash is enough (the secret has 256 random bits) and a password hash would
cost milliseconds on every request; comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from webhooks.ids import has_prefix, new_id
from webhooks.models import ApiKey, Tenant
from webhooks.timeutil import utcnow


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def create_api_key(tenant: Tenant) -> str:
    """Store a new key for ``tenant`` and return it whole (the only time it is readable)."""
    key_id = new_id("key")
    secret = secrets.token_urlsafe(32)
    ApiKey.create(id=key_id, tenant=tenant, secret_hash=_digest(secret))
    return f"{key_id}.{secret}"


def revoke_api_keys(tenant: Tenant) -> int:
    """Revoke every live key of ``tenant``; returns how many were revoked."""
    return (
        ApiKey.update(revoked_at=utcnow())
        .where((ApiKey.tenant == tenant) & ApiKey.revoked_at.is_null())
        .execute()
    )


def authenticate(raw_key: str) -> Tenant | None:
    """The tenant owning ``raw_key``, or None for a malformed, unknown or revoked key."""
    key_id, _, secret = raw_key.partition(".")
    if not secret or not has_prefix(key_id, "key"):
        return None
    row = (
        ApiKey.select(ApiKey, Tenant)
        .join(Tenant)
        .where((ApiKey.id == key_id) & ApiKey.revoked_at.is_null())
        .first()
    )
    if row is None or not hmac.compare_digest(row.secret_hash, _digest(secret)):
        return None
    return row.tenant
