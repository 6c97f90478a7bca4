"""Endpoint secrets and signing keys at rest: sealed in the database, clear to the API and the worker;
``flask secrets rotate-key`` seals them again under a new key with the old one still opening them;
migration 0016 seals what was stored in the clear."""

from __future__ import annotations

from collections.abc import Callable

from flask import Flask
from flask.testing import FlaskClient

from tests.api_helpers import create_endpoint
from tests.conftest import TEST_SECRETS_KEY
from webhooks import sealing
from webhooks.sealing import key_id, new_key
from webhooks.storage import db
from webhooks.storage.models import Endpoint
from webhooks.storage.resealing import reseal


def stored(endpoint_id: str) -> tuple[str, str | None]:
    """The endpoint's secret columns as the database holds them."""
    p = db.database.obj.param
    return db.database.execute_sql(
        f'SELECT "secret", "previous_secret" FROM "endpoint" WHERE "id" = {p}', [endpoint_id]
    ).fetchone()


def test_an_endpoint_secret_is_stored_sealed_and_shown_in_the_clear(client: FlaskClient, headers: dict[str, str]) -> None:
    created = create_endpoint(client, headers)

    secret, previous = stored(created["id"])

    assert secret.startswith(f"sealed:{key_id(TEST_SECRETS_KEY)}:") and previous is None
    assert created["secret"] not in secret and created["secret"].removeprefix("whsec_") not in secret
    assert client.get(f"/v1/endpoints/{created['id']}/secret", headers=headers).json["secret"] == created["secret"]
    assert Endpoint.get_by_id(created["id"]).secret == created["secret"]


def test_an_ed25519_signing_key_is_stored_sealed(client: FlaskClient, headers: dict[str, str]) -> None:
    created = create_endpoint(client, headers, signature_scheme="v1a")

    secret, _ = stored(created["id"])

    assert secret.startswith("sealed:") and "whsk_" not in secret
    assert Endpoint.get_by_id(created["id"]).secret.startswith("whsk_")


def test_a_rotation_keeps_the_previous_secret_sealed(client: FlaskClient, headers: dict[str, str]) -> None:
    created = create_endpoint(client, headers)

    rotated = client.post(f"/v1/endpoints/{created['id']}/secret/rotate", json={}, headers=headers)

    assert rotated.status_code == 200, rotated.json
    secret, previous = stored(created["id"])
    assert secret.startswith("sealed:") and previous.startswith("sealed:")
    endpoint = Endpoint.get_by_id(created["id"])
    assert (endpoint.previous_secret, endpoint.secret) == (created["secret"], rotated.json["secret"])


def test_rotate_key_seals_every_secret_under_the_new_key_while_the_old_one_still_opens(
    app: Flask, client: FlaskClient, headers: dict[str, str], make_app: Callable[..., Flask]
) -> None:
    created = [create_endpoint(client, headers) for _ in range(3)]
    client.post(f"/v1/endpoints/{created[0]['id']}/secret/rotate", json={}, headers=headers)
    new = new_key()
    rotating = make_app(secrets_key=f"{new},{TEST_SECRETS_KEY}")

    result = rotating.test_cli_runner().invoke(args=["secrets", "rotate-key"])

    assert result.exit_code == 0, result.output
    assert f"sealed under key {key_id(new)}: 4 again, 0 already" in result.output
    assert all(value is None or value.startswith(f"sealed:{key_id(new)}:")
               for endpoint in created for value in stored(endpoint["id"]))
    again = rotating.test_cli_runner().invoke(args=["secrets", "rotate-key"])
    assert "0 again, 4 already" in again.output
    only_new = make_app(secrets_key=new).test_client()
    assert [only_new.get(f"/v1/endpoints/{e['id']}/secret", headers=headers).json["secret"] for e in created[1:]] == [
        e["secret"] for e in created[1:]
    ]


def test_rotate_key_refuses_a_secret_it_cannot_open_naming_the_endpoint_not_the_secret(
    client: FlaskClient, headers: dict[str, str], make_app: Callable[..., Flask]
) -> None:
    created = create_endpoint(client, headers)
    stranger = make_app(secrets_key=new_key())

    result = stranger.test_cli_runner().invoke(args=["secrets", "rotate-key"])

    assert result.exit_code == 1
    assert f"endpoint {created['id']} (secret)" in result.output and key_id(TEST_SECRETS_KEY) in result.output
    assert created["secret"] not in result.output and TEST_SECRETS_KEY not in result.output


def test_secrets_stored_in_the_clear_before_migration_0016_are_sealed_by_it(
    client: FlaskClient, headers: dict[str, str]
) -> None:
    created = create_endpoint(client, headers)
    p = db.database.obj.param
    db.database.execute_sql(f'UPDATE "endpoint" SET "secret" = {p}, "previous_secret" = {p} WHERE "id" = {p}',
                            [created["secret"], "whsec_b2xkb2xkb2xkb2xkb2xkb2xkb2xkb2xk", created["id"]])
    assert Endpoint.get_by_id(created["id"]).secret == created["secret"]  # read as it is meanwhile

    done = reseal(db.database.obj, sealing.keyring(), (("endpoint", ("secret", "previous_secret")),))

    assert done.resealed == 2
    secret, previous = stored(created["id"])
    assert secret.startswith("sealed:") and previous.startswith("sealed:")
    assert Endpoint.get_by_id(created["id"]).secret == created["secret"]


def test_generate_key_prints_a_usable_key(app: Flask) -> None:
    result = app.test_cli_runner().invoke(args=["secrets", "generate-key"])
    assert result.exit_code == 0
    assert sealing.Keyring(sealing.parse_keys(result.output.strip())).ids == [key_id(result.output.strip())]


def test_an_api_process_holding_another_key_answers_500_without_the_secret_or_a_key(
    client: FlaskClient, headers: dict[str, str], make_app: Callable[..., Flask]
) -> None:
    created = create_endpoint(client, headers)
    stranger = make_app(secrets_key=new_key())
    stranger.testing = False  # the error handler answers, as in production

    response = stranger.test_client().get(f"/v1/endpoints/{created['id']}/secret", headers=headers)

    assert response.status_code == 500
    assert created["secret"] not in response.get_data(as_text=True)
    assert "sealed:" not in response.get_data(as_text=True)
