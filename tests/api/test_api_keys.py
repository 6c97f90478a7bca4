"""Several named API keys per tenant: create, list, revoke, and rotate without downtime (CLI and API)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

import peewee
import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.key_clock import Clock
from webhooks.ingest import auth_keys
from webhooks.ingest.auth_keys import LastUsed
from webhooks.storage.models import ApiKey
from webhooks.storage.timeutil import utcnow

#: Each test starts with an empty key cache and no record of last-used writes.
pytestmark = pytest.mark.usefixtures("fresh_caches")


def bearer(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"}


def status(client: FlaskClient, api_key: str) -> int:
    return client.get("/v1/endpoints", headers=bearer(api_key)).status_code


def key_id(api_key: str) -> str:
    return api_key.partition(".")[0]


def cli(app: Flask, *args: str) -> Any:
    result = app.test_cli_runner().invoke(args=list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


# --- several keys --------------------------------------------------------------------------------


def test_a_tenant_holds_several_named_keys_that_all_work(
    client: FlaskClient, headers: dict[str, str], tenant: SimpleNamespace
) -> None:
    created = client.post("/v1/api-keys", json={"name": "billing-service"}, headers=headers)

    assert created.status_code == 201
    body = created.json
    assert set(body) == {"id", "name", "created_at", "last_used_at", "expires_at", "api_key"}
    assert (body["name"], body["expires_at"]) == ("billing-service", None)
    assert body["api_key"].startswith(body["id"] + ".")
    assert status(client, body["api_key"]) == 200 and status(client, tenant.api_key) == 200
    listed = client.get("/v1/api-keys", headers=headers).json["data"]
    expected = [(key_id(tenant.api_key), "default"), (body["id"], "billing-service")]
    assert [(k["id"], k["name"]) for k in listed] == expected
    assert all("api_key" not in k and k["created_at"].endswith("Z") for k in listed)


def test_the_cli_adds_and_lists_keys(app: Flask, client: FlaskClient, tenant: SimpleNamespace) -> None:
    added = cli(app, "tenant", "add-key", tenant.id, "--name", "nightly-import")

    assert status(client, added["api_key"]) == 200
    listed = cli(app, "tenant", "keys", tenant.id)
    expected = [(key_id(tenant.api_key), "default"), (added["id"], "nightly-import")]
    assert [(k["id"], k["name"]) for k in listed] == expected
    assert listed[1]["last_used_at"] is not None and set(listed[1]) == {"id", "name", "created_at", "last_used_at",
                                                                        "expires_at"}


@pytest.mark.parametrize("body", [{}, {"name": ""}, {"name": "x" * 101}, {"name": "a\x00b"}, {"name": "a", "x": 1}])
def test_a_key_needs_a_name(client: FlaskClient, headers: dict[str, str], body: dict[str, Any]) -> None:
    response = client.post("/v1/api-keys", json=body, headers=headers)

    assert response.status_code == 422
    assert ApiKey.select().count() == 1


# --- revocation ------------------------------------------------------------------------------------


def test_a_revoked_key_stops_working_at_once_in_this_process_and_leaves_the_others(
    client: FlaskClient, headers: dict[str, str], tenant: SimpleNamespace
) -> None:
    other = client.post("/v1/api-keys", json={"name": "ci"}, headers=headers).json
    assert status(client, other["api_key"]) == 200  # cached now

    response = client.delete(f"/v1/api-keys/{other['id']}", headers=headers)

    assert response.status_code == 204
    assert status(client, other["api_key"]) == 401
    assert status(client, tenant.api_key) == 200
    assert [k["id"] for k in client.get("/v1/api-keys", headers=headers).json["data"]] == [key_id(tenant.api_key)]
    assert client.delete(f"/v1/api-keys/{other['id']}", headers=headers).status_code == 404


def test_the_cli_revokes_one_key(app: Flask, client: FlaskClient, tenant: SimpleNamespace) -> None:
    added = cli(app, "tenant", "add-key", tenant.id, "--name", "ci")

    revoked = cli(app, "tenant", "revoke-key", tenant.id, added["id"])

    assert revoked["id"] == added["id"] and revoked["revoked_at"]
    assert status(client, added["api_key"]) == 401 and status(client, tenant.api_key) == 200


def test_another_tenants_keys_are_invisible(
    client: FlaskClient, headers: dict[str, str], other_tenant: SimpleNamespace
) -> None:
    theirs = key_id(other_tenant.api_key)

    assert client.get(f"/v1/api-keys/{theirs}", headers=headers).status_code == 404
    assert client.delete(f"/v1/api-keys/{theirs}", headers=headers).status_code == 404
    assert client.post(f"/v1/api-keys/{theirs}/rotate", json={}, headers=headers).status_code == 404
    assert theirs not in json.dumps(client.get("/v1/api-keys", headers=headers).json)
    assert status(client, other_tenant.api_key) == 200


# --- rotation ---------------------------------------------------------------------------------------


def test_rotate_key_with_an_overlap_keeps_the_old_key_working_then_it_expires_by_itself(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace, later: Clock
) -> None:
    rotated = cli(app, "tenant", "rotate-key", tenant.id, "--overlap", "24h")

    assert (rotated["revoked"], rotated["name"]) == (0, "default")
    (expiring,) = rotated["expiring"]
    assert expiring["id"] == key_id(tenant.api_key)
    assert status(client, tenant.api_key) == 200 and status(client, rotated["api_key"]) == 200
    later.offset = timedelta(hours=23, minutes=59)
    assert status(client, tenant.api_key) == 200  # still within the overlap (and cached)

    later.offset = timedelta(hours=24, seconds=1)

    assert status(client, tenant.api_key) == 401  # the cached entry knows the expiry
    auth_keys.key_cache.clear()
    assert status(client, tenant.api_key) == 401
    assert status(client, rotated["api_key"]) == 200
    assert [k["id"] for k in cli(app, "tenant", "keys", tenant.id)] == [rotated["key_id"]]


def test_rotate_key_without_an_overlap_revokes_at_once(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace
) -> None:
    rotated = cli(app, "tenant", "rotate-key", tenant.id)

    assert (rotated["revoked"], rotated["expiring"]) == (1, [])
    assert status(client, tenant.api_key) == 401 and status(client, rotated["api_key"]) == 200


def test_rotate_one_key_by_id_leaves_the_others_alone(
    app: Flask, client: FlaskClient, headers: dict[str, str], tenant: SimpleNamespace, later: Clock
) -> None:
    ci = cli(app, "tenant", "add-key", tenant.id, "--name", "ci")

    rotated = cli(app, "tenant", "rotate-key", tenant.id, "--key", ci["id"], "--overlap", "1h")

    assert rotated["name"] == "ci" and [e["id"] for e in rotated["expiring"]] == [ci["id"]]
    later.offset = timedelta(hours=2)
    auth_keys.key_cache.clear()
    assert status(client, ci["api_key"]) == 401
    assert status(client, tenant.api_key) == 200 and status(client, rotated["api_key"]) == 200


def test_rotate_through_the_api_answers_the_new_key_and_the_old_keys_expiry(
    client: FlaskClient, headers: dict[str, str], tenant: SimpleNamespace, later: Clock
) -> None:
    response = client.post(f"/v1/api-keys/{key_id(tenant.api_key)}/rotate", json={"overlap": "2h"}, headers=headers)

    assert response.status_code == 201
    body = response.json
    assert body["name"] == "default" and body["replaced"]["id"] == key_id(tenant.api_key)
    expires = datetime.fromisoformat(body["replaced"]["expires_at"].replace("Z", "+00:00")).replace(tzinfo=None)
    assert timedelta(hours=1, minutes=59) < expires - utcnow() <= timedelta(hours=2)
    assert status(client, tenant.api_key) == 200
    later.offset = timedelta(hours=2, seconds=1)
    assert status(client, tenant.api_key) == 401 and status(client, body["api_key"]) == 200


@pytest.mark.parametrize("overlap", ["forever", "31d", "-1h"])
def test_rotate_refuses_a_bad_overlap(client: FlaskClient, headers: dict[str, str], tenant: SimpleNamespace,
                                      overlap: str) -> None:
    response = client.post(f"/v1/api-keys/{key_id(tenant.api_key)}/rotate", json={"overlap": overlap}, headers=headers)

    assert response.status_code == 422 and list(response.json["errors"]["json"]) == ["overlap"]
    assert ApiKey.select().count() == 1


def test_the_cli_refuses_an_unknown_key_or_tenant(app: Flask, tenant: SimpleNamespace) -> None:
    unknown_key = app.test_cli_runner().invoke(args=["tenant", "rotate-key", tenant.id, "--key", "key_nope"])
    unknown_tenant = app.test_cli_runner().invoke(args=["tenant", "keys", "ten_nope"])
    bad_overlap = app.test_cli_runner().invoke(args=["tenant", "rotate-key", tenant.id, "--overlap", "soon"])

    assert unknown_key.exit_code == 1 and "no live API key key_nope" in unknown_key.output
    assert unknown_tenant.exit_code == 1 and "no tenant with the id or name 'ten_nope'" in unknown_tenant.output
    assert bad_overlap.exit_code == 2 and "invalid duration" in bad_overlap.output
    assert ApiKey.select().count() == 1


# --- last used ----------------------------------------------------------------------------------------


def test_last_used_is_written_at_most_once_a_minute_per_key(
    client: FlaskClient, tenant: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]
    monkeypatch.setattr(auth_keys, "last_used", LastUsed(interval=60.0, clock=lambda: now[0]))
    writes: list[str] = []
    touch = auth_keys.ApiKey.update
    monkeypatch.setattr(auth_keys.ApiKey, "update", lambda *a, **k: writes.append("update") or touch(*a, **k))
    row = lambda: ApiKey.get_by_id(key_id(tenant.api_key))  # noqa: E731
    assert row().last_used_at is None

    for _ in range(20):
        assert status(client, tenant.api_key) == 200
    first = row().last_used_at

    assert first is not None and writes == ["update"]
    now[0] += 59.0
    status(client, tenant.api_key)
    assert writes == ["update"]
    now[0] += 2.0
    ApiKey.update(last_used_at=first - timedelta(minutes=5)).where(ApiKey.id == key_id(tenant.api_key)).execute()
    writes.clear()
    status(client, tenant.api_key)
    assert writes == ["update"] and row().last_used_at > first - timedelta(minutes=5)


def test_last_used_is_shown_in_the_listing(client: FlaskClient, headers: dict[str, str]) -> None:
    (listed,) = client.get("/v1/api-keys", headers=headers).json["data"]

    assert listed["last_used_at"] is not None and listed["last_used_at"].endswith("Z")


def test_a_failing_last_used_write_does_not_fail_the_request(
    client: FlaskClient, tenant: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise peewee.OperationalError("database is locked")

    monkeypatch.setattr(auth_keys.ApiKey, "update", broken)

    assert status(client, tenant.api_key) == 200
