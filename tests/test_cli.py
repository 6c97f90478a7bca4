"""``flask tenant create`` and ``flask tenant rotate-key``: keys shown once, stored hashed, revocable."""

from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace

from flask import Flask
from flask.testing import FlaskClient

import peewee
import pytest
from pathlib import Path
from playhouse.migrations import Runner

from webhooks.storage import db
from webhooks.cli import MIGRATIONS_DIR
from webhooks.storage.ids import new_id
from webhooks.storage.models import ApiKey, Tenant


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
    assert rotated["tenant"] == {"id": tenant.id, "name": "acme"}
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

    assert result.exit_code == 1 and "no tenant with the id or name 'ten_nope'" in result.output
    assert stored_key_text() == before
    assert client.get("/v1/endpoints", headers=bearer(tenant.api_key)).status_code == 200


def test_tenant_create_refuses_a_name_taken_in_any_case_naming_the_existing_tenant(
    app: Flask, tenant: SimpleNamespace
) -> None:
    before = Tenant.select().count()

    results = [app.test_cli_runner().invoke(args=["tenant", "create", name]) for name in ("acme", " ACME ")]

    for result in results:
        assert result.exit_code == 1
        assert f"a tenant named 'acme' already exists ({tenant.id}): choose another name" in result.output
    assert Tenant.select().count() == before


def test_the_database_refuses_a_second_tenant_of_the_same_name_whatever_its_case(tenant: SimpleNamespace) -> None:
    with pytest.raises(peewee.IntegrityError), db.database.atomic():
        Tenant.create(id=new_id("ten"), name="Acme")


def test_migration_0011_renames_existing_duplicates_keeping_the_oldest_name(tmp_path: Path) -> None:
    database = peewee.SqliteDatabase(str(tmp_path / "old.db"))
    Runner(database, MIGRATIONS_DIR).up(target="0009_api_key_names")
    rows = [("ten_a", "acme", "2026-01-01"), ("ten_b", "ACME", "2026-01-02"), ("ten_c", "acme", "2026-01-03"),
            ("ten_d", "globex", "2026-01-01")]
    for tenant_id, name, created in rows:
        database.execute_sql("INSERT INTO tenant (id, name, event_seq, created_at) VALUES (?, ?, 0, ?)",
                             (tenant_id, name, created))

    Runner(database, MIGRATIONS_DIR).up()

    names = dict(database.execute_sql("SELECT id, name FROM tenant").fetchall())
    assert names == {"ten_a": "acme", "ten_b": "ACME (ten_b)", "ten_c": "acme (ten_c)", "ten_d": "globex"}
    with pytest.raises(peewee.IntegrityError):
        database.execute_sql("INSERT INTO tenant (id, name, event_seq, created_at) VALUES ('ten_e', 'Globex', 0, "
                             "'2026-01-04')")


def test_key_commands_name_the_tenant_they_acted_on(app: Flask, tenant: SimpleNamespace) -> None:
    runner = app.test_cli_runner()

    added = json.loads(runner.invoke(args=["tenant", "add-key", tenant.id, "--name", "ci"]).output)
    revoked = json.loads(runner.invoke(args=["tenant", "revoke-key", tenant.id, added["id"]]).output)

    assert added["tenant"] == revoked["tenant"] == {"id": tenant.id, "name": "acme"}


def test_migrate_says_in_one_line_that_the_database_is_missing_and_how_to_create_it(make_app) -> None:
    app = make_app(database_url="postgresql://postgres:hunter2@127.0.0.1:5432/no_such_database_34")

    result = app.test_cli_runner().invoke(args=["migrate"])

    assert result.exit_code == 1
    assert result.output.splitlines() == [
        'Error: database "no_such_database_34" does not exist on PostgreSQL at 127.0.0.1:5432: create it '
        "(createdb -h 127.0.0.1 -p 5432 -U postgres no_such_database_34), or fix DATABASE_URL"]


def test_tenant_list_shows_every_tenant_with_its_live_keys(
    app: Flask, tenant: SimpleNamespace, other_tenant: SimpleNamespace
) -> None:
    runner = app.test_cli_runner()
    runner.invoke(args=["tenant", "add-key", "acme", "--name", "ci"])

    result = runner.invoke(args=["tenant", "list"])

    assert result.exit_code == 0, result.output
    listed = json.loads(result.output)
    assert [(row["id"], row["name"], row["live_keys"]) for row in listed] == [
        (tenant.id, "acme", 2), (other_tenant.id, "globex", 1)]
    assert set(listed[0]) == {"id", "name", "contact_email", "created_at", "live_keys"}


@pytest.mark.parametrize("command", [
    ["tenant", "keys", "{t}"], ["tenant", "add-key", "{t}", "--name", "ci"], ["tenant", "rotate-key", "{t}"],
    ["dlq", "replay", "--tenant", "{t}"],
])
@pytest.mark.parametrize("given", ["id", "name", "NAME"])
def test_every_command_that_takes_a_tenant_takes_its_id_or_its_name(
    app: Flask, tenant: SimpleNamespace, command: list[str], given: str
) -> None:
    reference = {"id": tenant.id, "name": tenant.name, "NAME": tenant.name.upper()}[given]

    result = app.test_cli_runner().invoke(args=[word.replace("{t}", reference) for word in command])

    assert result.exit_code == 0, result.output
    # Each names the tenant it acted on; ``tenant keys`` lists its keys.
    assert (tenant.api_key.partition(".")[0] if command[1] == "keys" else tenant.id) in result.output


def test_a_tenant_that_does_not_exist_is_named_back_with_where_to_look(app: Flask, tenant: SimpleNamespace) -> None:
    result = app.test_cli_runner().invoke(args=["tenant", "keys", "initech"])

    assert result.exit_code == 1
    assert "no tenant with the id or name 'initech' (flask tenant list shows them)" in result.output
