"""``flask tenant create`` and ``flask tenant rotate-key``: keys shown once, stored hashed, revocable."""

from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace

from flask import Flask
from flask.testing import FlaskClient

from webhooks.models import ApiKey


def bearer(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"}


def stored_key_text() -> str:
    """Every column of every api_key row, as text."""
    return json.dumps([row.__data__ for row in ApiKey.select()], default=str)


def test_tenant_create_prints_a_working_key_that_is_stored_only_as_a_hash(app: Flask, client: FlaskClient) -> None:
    result = app.test_cli_runner().invoke(args=["tenant", "create", "Initech"])

    assert result.exit_code == 0, result.output
    created = json.loads(result.output)
    assert created["name"] == "Initech" and created["id"].startswith("ten_")
    key_id, _, secret = created["api_key"].partition(".")
    assert client.get("/v1/endpoints", headers=bearer(created["api_key"])).status_code == 200
    assert ApiKey.get_by_id(key_id).secret_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in stored_key_text()


def test_rotate_key_revokes_the_old_key_and_issues_a_new_one_stored_only_as_a_hash(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace
) -> None:
    result = app.test_cli_runner().invoke(args=["tenant", "rotate-key", tenant.id])

    assert result.exit_code == 0, result.output
    rotated = json.loads(result.output)
    assert (rotated["id"], rotated["revoked"]) == (tenant.id, 1)
    assert rotated["api_key"] != tenant.api_key
    old = client.get("/v1/endpoints", headers=bearer(tenant.api_key))
    assert old.status_code == 401 and old.json["message"] == "invalid API key (unknown or revoked)"
    assert client.get("/v1/endpoints", headers=bearer(rotated["api_key"])).status_code == 200
    stored = stored_key_text()
    for api_key in (tenant.api_key, rotated["api_key"]):
        key_id, _, secret = api_key.partition(".")
        assert key_id in stored and secret not in stored
    assert ApiKey.get_by_id(tenant.api_key.partition(".")[0]).revoked_at is not None


def test_rotate_key_of_an_unknown_tenant_fails_and_changes_nothing(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace
) -> None:
    before = stored_key_text()

    result = app.test_cli_runner().invoke(args=["tenant", "rotate-key", "ten_nope"])

    assert result.exit_code == 1 and "no tenant ten_nope" in result.output
    assert stored_key_text() == before
    assert client.get("/v1/endpoints", headers=bearer(tenant.api_key)).status_code == 200
