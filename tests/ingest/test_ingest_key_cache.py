"""The per-process API key cache: a verified key skips the database for a few seconds, no longer.

What it means for operators: a key revoked by another process (another gunicorn worker,
``flask tenant rotate-key`` on another machine) keeps working in this process for at most
``KEY_CACHE_SECONDS``; a revocation in this process applies at once; a wrong secret is
never accepted, cached or not.
"""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Iterator

import pytest
from flask.testing import FlaskClient

from webhooks.ingest import auth_keys
from webhooks.ingest.auth_keys import KeyCache, revoke_api_keys
from webhooks.storage.models import ApiKey, Tenant
from webhooks.storage.timeutil import utcnow


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeClock]:
    """A fresh cache with a 5 s TTL on a clock the test moves by hand."""
    fake = FakeClock()
    monkeypatch.setattr(auth_keys, "key_cache", KeyCache(ttl=5.0, clock=fake))
    yield fake


def revoke_elsewhere(tenant: SimpleNamespace) -> None:
    """What another process's revocation looks like from here: the row changes, our cache does not."""
    ApiKey.update(revoked_at=utcnow()).where(ApiKey.tenant == tenant.id).execute()


def endpoints_status(client: FlaskClient, api_key: str) -> int:
    return client.get("/v1/endpoints", headers={"Authorization": f"Bearer {api_key}"}).status_code


def test_a_key_revoked_elsewhere_keeps_working_here_until_the_ttl_passes(
    client: FlaskClient, tenant: SimpleNamespace, clock: FakeClock
) -> None:
    assert endpoints_status(client, tenant.api_key) == 200  # verified once: cached
    revoke_elsewhere(tenant)

    clock.now += 4.9
    assert endpoints_status(client, tenant.api_key) == 200  # still within the TTL

    clock.now += 0.2
    assert endpoints_status(client, tenant.api_key) == 401  # expired: the database says revoked


def test_a_revocation_in_this_process_applies_at_once(
    client: FlaskClient, tenant: SimpleNamespace, clock: FakeClock
) -> None:
    assert endpoints_status(client, tenant.api_key) == 200

    assert revoke_api_keys(Tenant.get_by_id(tenant.id)) == 1

    assert endpoints_status(client, tenant.api_key) == 401


def test_a_wrong_secret_for_a_cached_key_id_is_refused(
    client: FlaskClient, tenant: SimpleNamespace, clock: FakeClock
) -> None:
    assert endpoints_status(client, tenant.api_key) == 200
    key_id, _, secret = tenant.api_key.partition(".")

    forged = f"{key_id}.{secret[:-1]}{'A' if secret[-1] != 'A' else 'B'}"

    assert endpoints_status(client, forged) == 401
    assert endpoints_status(client, tenant.api_key) == 200


def test_unknown_and_revoked_keys_are_not_cached(
    client: FlaskClient, tenant: SimpleNamespace, clock: FakeClock
) -> None:
    revoke_elsewhere(tenant)
    assert endpoints_status(client, tenant.api_key) == 401
    assert endpoints_status(client, "key_01jd3k0000000000000000000a.nope") == 401

    assert auth_keys.key_cache.get(tenant.api_key.partition(".")[0]) is None


def test_each_request_gets_its_own_tenant_object(
    tenant: SimpleNamespace, clock: FakeClock
) -> None:
    first = auth_keys.authenticate(tenant.api_key)
    second = auth_keys.authenticate(tenant.api_key)  # from the cache

    assert first is not None and second is not None and first is not second
    assert (second.id, second.name) == (tenant.id, tenant.name)
    second.name = "changed by one request"
    third = auth_keys.authenticate(tenant.api_key)
    assert third is not None and third.name == tenant.name


def test_a_ttl_of_zero_turns_the_cache_off(
    client: FlaskClient, tenant: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(auth_keys, "key_cache", KeyCache(ttl=0.0))
    assert endpoints_status(client, tenant.api_key) == 200

    revoke_elsewhere(tenant)

    assert endpoints_status(client, tenant.api_key) == 401


def test_the_cache_is_bounded(tenant: SimpleNamespace) -> None:
    cache = KeyCache(ttl=5.0, size=3)
    row = Tenant.get_by_id(tenant.id)
    for i in range(3):
        cache.put(f"key_{i}", "hash", row)
    assert cache.get("key_0") is not None

    cache.put("key_3", "hash", row)  # full: start afresh rather than grow

    assert cache.get("key_0") is None and cache.get("key_3") is not None


def test_the_ttl_is_five_seconds_unless_the_environment_sets_it() -> None:
    assert auth_keys.key_cache_seconds({}) == 5.0
    assert auth_keys.key_cache_seconds({"API_KEY_CACHE_SECONDS": "0"}) == 0.0  # no cache
    assert auth_keys.KEY_CACHE_SECONDS == auth_keys.key_cache_seconds(os.environ)
