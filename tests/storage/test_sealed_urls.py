"""Credentials in destination URLs: sealed at rest like endpoint secrets, masked (``user:***@``)
wherever a URL is shown, and a masked URL sent back keeps the stored password.

The URLs point at 127.0.0.1 (the ``settings`` fixture allows private targets); nothing is delivered.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.api_helpers import create_endpoint
from tests.conftest import TEST_SECRETS_KEY
from tests.console_helpers import log_in
from tests.portal_helpers import portal_client, portal_post
from webhooks import sealing
from webhooks.sealing import key_id, new_key
from webhooks.secrecy import has_password, mask, unmasked
from webhooks.storage import db
from webhooks.storage.models import Endpoint
from webhooks.storage.resealing import SEALED_URLS, reseal

PASSWORD = "s3cr%40t-pw"
AMQP = f"amqp://app:{PASSWORD}@127.0.0.1:5672/theirs?exchange=orders&routing_key=new"
REDIS = f"redis://default:{PASSWORD}@127.0.0.1:6379/0?stream=missed"
SHOWN_AMQP = "amqp://app:***@127.0.0.1:5672/theirs?exchange=orders&routing_key=new"
SHOWN_REDIS = "redis://default:***@127.0.0.1:6379/0?stream=missed"


def stored(endpoint_id: str) -> tuple[str, str | None]:
    """The endpoint's URL columns as the database holds them."""
    p = db.database.obj.param
    return db.database.execute_sql(f'SELECT "url", "fallback_url" FROM "endpoint" WHERE "id" = {p}',
                                   [endpoint_id]).fetchone()


# -- the rules -------------------------------------------------------------------------------------


def test_a_masked_url_sent_back_reads_as_the_stored_one_only_for_the_same_host_and_user() -> None:
    assert mask(AMQP) == SHOWN_AMQP and has_password(AMQP) and not has_password(SHOWN_AMQP)
    assert unmasked(SHOWN_AMQP, AMQP) == AMQP
    assert unmasked(SHOWN_AMQP.replace("routing_key=new", "routing_key=old"), AMQP) == AMQP.replace("=new", "=old")
    assert unmasked("https://127.0.0.1/hook", AMQP) == "https://127.0.0.1/hook"
    for elsewhere in (SHOWN_AMQP.replace("127.0.0.1", "10.0.0.9"), SHOWN_AMQP.replace("app:", "root:"),
                      SHOWN_AMQP.replace("amqp:", "amqps:")):
        with pytest.raises(ValueError, match=r"the password shows as \*\*\*"):
            unmasked(elsewhere, AMQP)
    with pytest.raises(ValueError):
        unmasked(SHOWN_AMQP, None)  # "***" is never taken for a password


# -- at rest ---------------------------------------------------------------------------------------


def test_a_url_with_a_password_is_stored_sealed_one_without_in_the_clear(client: FlaskClient, headers: dict[str, str]) -> None:
    created = create_endpoint(client, headers, AMQP, fallback_url=REDIS)
    plain = create_endpoint(client, headers, "http://127.0.0.1:9/hook", fallback_url="http://127.0.0.1:9/spare")

    url, fallback_url = stored(created["id"])
    assert url.startswith(f"sealed:{key_id(TEST_SECRETS_KEY)}:") and fallback_url.startswith("sealed:")
    assert "s3cr" not in url + fallback_url and "127.0.0.1" not in url + fallback_url
    assert stored(plain["id"]) == ("http://127.0.0.1:9/hook", "http://127.0.0.1:9/spare")  # still searchable
    endpoint = Endpoint.get_by_id(created["id"])
    assert (endpoint.url, endpoint.fallback_url) == (AMQP, REDIS)


def test_rotate_key_reseals_urls_with_a_password_and_leaves_the_others(
    client: FlaskClient, headers: dict[str, str], make_app: Callable[..., Flask]
) -> None:
    created = create_endpoint(client, headers, AMQP, fallback_url=REDIS)
    plain = create_endpoint(client, headers, "http://127.0.0.1:9/hook")
    new = new_key()

    result = make_app(secrets_key=f"{new},{TEST_SECRETS_KEY}").test_cli_runner().invoke(args=["secrets", "rotate-key"])

    assert result.exit_code == 0, result.output
    assert "sealed under key" in result.output and PASSWORD not in result.output
    assert all(value.startswith(f"sealed:{key_id(new)}:") for value in stored(created["id"]))
    assert stored(plain["id"]) == ("http://127.0.0.1:9/hook", None)
    sealing.configure(new)  # the old key gone: the URLs open with the new one alone
    endpoint = Endpoint.get_by_id(created["id"])
    assert (endpoint.url, endpoint.fallback_url) == (AMQP, REDIS)


def test_urls_stored_in_the_clear_before_migration_0027_are_sealed_by_it(
    client: FlaskClient, headers: dict[str, str]
) -> None:
    created = create_endpoint(client, headers, "http://127.0.0.1:9/hook")
    p = db.database.obj.param
    db.database.execute_sql(f'UPDATE "endpoint" SET "url" = {p}, "fallback_url" = {p} WHERE "id" = {p}',
                            [AMQP, REDIS, created["id"]])

    done = reseal(db.database.obj, sealing.keyring(), (), SEALED_URLS)

    assert done.resealed == 2
    assert all(value.startswith("sealed:") for value in stored(created["id"]))
    assert Endpoint.get_by_id(created["id"]).url == AMQP


# -- shown masked, sent back masked ----------------------------------------------------------------


def test_the_api_shows_urls_masked_and_a_masked_url_sent_back_keeps_the_password(
    client: FlaskClient, headers: dict[str, str]
) -> None:
    created = create_endpoint(client, headers, AMQP, fallback_url=REDIS)
    assert (created["url"], created["fallback_url"]) == (SHOWN_AMQP, SHOWN_REDIS)
    path = f"/v1/endpoints/{created['id']}"

    echoed = client.patch(path, json={"url": created["url"], "fallback_url": created["fallback_url"],
                                      "description": "echo"}, headers=headers)
    requeued = client.patch(path, json={"url": SHOWN_AMQP.replace("=new", "=renamed")}, headers=headers)
    elsewhere = client.patch(path, json={"fallback_url": SHOWN_REDIS.replace("127.0.0.1", "127.0.0.2")}, headers=headers)

    assert echoed.status_code == 200 and requeued.status_code == 200
    assert echoed.json["url"] == SHOWN_AMQP and PASSWORD not in str(echoed.json) + str(requeued.json)
    assert elsewhere.status_code == 422
    assert "the password shows as ***" in elsewhere.json["errors"]["json"]["fallback_url"][0]
    endpoint = Endpoint.get_by_id(created["id"])
    assert (endpoint.url, endpoint.fallback_url) == (AMQP.replace("=new", "=renamed"), REDIS)
    assert PASSWORD not in str(client.get("/v1/endpoints", headers=headers).json)


def test_the_svix_api_shows_the_url_masked_and_keeps_the_password_of_an_echo(
    client: FlaskClient, tenant: SimpleNamespace, auth: Any, platform: dict[str, str]
) -> None:
    created = create_endpoint(client, auth(tenant), AMQP)
    path = f"/api/v1/app/{tenant.id}/endpoint/{created['id']}"

    shown = client.get(path, headers=platform)
    patched = client.patch(path, json={"url": shown.json["url"], "description": "via svix"}, headers=platform)

    assert shown.status_code == 200 and shown.json["url"] == SHOWN_AMQP
    assert patched.status_code == 200 and patched.json["url"] == SHOWN_AMQP
    assert Endpoint.get_by_id(created["id"]).url == AMQP


def test_the_portal_shows_urls_masked_and_saving_the_form_as_shown_keeps_the_passwords(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace, auth: Any
) -> None:
    created = create_endpoint(client, auth(tenant), AMQP, fallback_url=REDIS)
    browser = portal_client(app, tenant)

    page = browser.get(f"/portal/endpoints/{created['id']}").get_data(as_text=True)
    form = browser.get(f"/portal/endpoints/{created['id']}/edit").get_data(as_text=True)
    saved = portal_post(browser, f"/portal/endpoints/{created['id']}/edit", {
        "url": SHOWN_AMQP, "fallback_url": SHOWN_REDIS, "description": "kept", "rate_limit": ""})

    assert SHOWN_AMQP.replace("&", "&amp;") in page and SHOWN_REDIS in page and PASSWORD not in page
    assert f'value="{SHOWN_REDIS}"' in form and PASSWORD not in form
    assert "A RabbitMQ exchange" in page and "A Redis stream" in page  # how to verify, for both kinds
    assert saved.status_code == 303
    endpoint = Endpoint.get_by_id(created["id"])
    assert (endpoint.url, endpoint.fallback_url, endpoint.description) == (AMQP, REDIS, "kept")


def test_the_console_shows_urls_masked(client: FlaskClient, headers: dict[str, str]) -> None:
    created = create_endpoint(client, headers, AMQP, fallback_url=REDIS)
    staff = client.application.test_client()
    log_in(staff)

    page = staff.get(f"/console/endpoints/{created['id']}").get_data(as_text=True)
    listed = staff.get("/console/endpoints").get_data(as_text=True)

    assert SHOWN_REDIS in page and "fallback while away" in page
    assert PASSWORD not in page + listed and "app:***@127.0.0.1" in listed
