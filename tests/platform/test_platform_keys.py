"""Platform keys: ``flask platform …`` on the tenant keys' own mechanism (hashed, cached, last used,
revoked at once, rotated with an overlap); a platform key is never a tenant's."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.key_clock import Clock
from webhooks.ingest import auth_keys
from webhooks.storage.models import ApiKey

#: Each test starts with an empty key cache and no record of last-used writes.
pytestmark = pytest.mark.usefixtures("fresh_caches")


def cli(app: Flask, *args: str) -> Any:
    result = app.test_cli_runner().invoke(args=["platform", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def status(client: FlaskClient, api_key: str) -> int:
    return client.get("/v1/tenants", headers={"Authorization": f"Bearer {api_key}"}).status_code


def test_create_key_prints_id_name_and_the_key_once_stored_only_as_a_hash(app: Flask, client: FlaskClient) -> None:
    created = cli(app, "create-key", "backend")

    assert set(created) == {"id", "name", "api_key"} and created["name"] == "backend"
    row = ApiKey.get_by_id(created["id"])
    assert row.tenant_id is None
    assert row.secret_hash == hashlib.sha256(created["api_key"].partition(".")[2].encode()).hexdigest()
    assert status(client, created["api_key"]) == 200


def test_keys_lists_the_live_platform_keys_with_created_and_last_used_and_no_tenant_keys(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace
) -> None:
    backend, ci = cli(app, "create-key", "backend"), cli(app, "create-key", "ci")
    status(client, backend["api_key"])

    listed = cli(app, "keys")

    assert [k["id"] for k in listed] == [backend["id"], ci["id"]]
    assert listed[0]["last_used_at"] is not None and listed[1]["last_used_at"] is None
    assert all(k["created_at"] for k in listed) and "api_key" not in listed[0]


def test_revoke_key_stops_it_at_once(app: Flask, client: FlaskClient) -> None:
    created = cli(app, "create-key", "backend")
    assert status(client, created["api_key"]) == 200

    revoked = cli(app, "revoke-key", created["id"])

    assert revoked["id"] == created["id"] and revoked["revoked_at"]
    assert status(client, created["api_key"]) == 401 and cli(app, "keys") == []


def test_rotate_key_with_an_overlap_keeps_the_old_key_working_then_it_expires(
    app: Flask, client: FlaskClient, later: Clock
) -> None:
    old = cli(app, "create-key", "backend")

    new = cli(app, "rotate-key", old["id"], "--overlap", "1h")

    assert new["name"] == "backend" and new["replaced"]["id"] == old["id"] and new["replaced"]["expires_at"]
    assert status(client, old["api_key"]) == 200 and status(client, new["api_key"]) == 200
    later.offset = timedelta(hours=1, seconds=1)
    auth_keys.key_cache.clear()
    assert status(client, old["api_key"]) == 401 and status(client, new["api_key"]) == 200


def test_a_tenants_key_id_is_not_a_platform_key_to_revoke(app: Flask, tenant: SimpleNamespace) -> None:
    result = app.test_cli_runner().invoke(args=["platform", "revoke-key", tenant.api_key.partition(".")[0]])

    assert result.exit_code == 1 and "no live API key" in result.output and "for the platform" in result.output


def test_create_key_refuses_an_empty_name(app: Flask) -> None:
    result = app.test_cli_runner().invoke(args=["platform", "create-key", " "])

    assert result.exit_code == 2 and "1 to 100 characters" in result.output
