"""Console sessions live on the server (36.7): logout, a password change and disabling the account
end them at once, and a copy of the old cookie with its CSRF token opens nothing and changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.api_helpers import create_endpoint
from tests.console_helpers import PASSWORD, form_csrf, log_in_with_form, staff
from webhooks.console.models import AuditEntry, StaffUser
from webhooks.pages.models import PageSession
from webhooks.storage.models import Endpoint
from webhooks.storage.timeutil import utcnow


def logged_in_browser(client: FlaskClient, email: str) -> tuple[str, str]:
    """Log ``client`` in through the form; the session cookie's value and a console page's CSRF token."""
    assert log_in_with_form(client, email, PASSWORD).status_code == 303
    cookie = client.get_cookie("console_session", path="/console")
    assert cookie is not None
    return cookie.value, form_csrf(client.get("/console/").get_data(as_text=True))


def copy_of(app: Flask, cookie: str) -> FlaskClient:
    """Another browser holding the same session cookie (a stolen or left-behind copy)."""
    other = app.test_client()
    other.set_cookie("console_session", cookie, path="/console")
    return other


def log_out(app: Flask, client: FlaskClient, email: str) -> None:
    token = form_csrf(client.get("/console/").get_data(as_text=True))
    assert client.post("/console/logout", data={"csrf_token": token}).status_code == 303


def change_password(app: Flask, client: FlaskClient, email: str) -> None:
    result = app.test_cli_runner().invoke(args=["staff", "set-password", email, "--password-stdin"],
                                          input="a brand new password\n")
    assert result.exit_code == 0 and "1 session ended" in result.output, result.output


def disable(app: Flask, client: FlaskClient, email: str) -> None:
    result = app.test_cli_runner().invoke(args=["staff", "disable", email])
    assert result.exit_code == 0 and "1 session ended" in result.output, result.output


@pytest.mark.parametrize("end", [log_out, change_password, disable], ids=["logout", "password change", "disabled"])
def test_the_old_cookie_and_its_csrf_token_stop_working_at_once(
    app: Flask, client: FlaskClient, headers, end: Callable[[Flask, FlaskClient, str], None]
) -> None:
    endpoint = create_endpoint(client, headers)["id"]
    Endpoint.update(disabled=True, disabled_reason="customer asked").where(Endpoint.id == endpoint).execute()
    user = staff("operator")
    cookie, token = logged_in_browser(client, user.email)
    stolen = copy_of(app, cookie)
    assert stolen.get("/console/").status_code == 200  # the copy works while the session lasts

    end(app, client, user.email)

    page = stolen.get("/console/")
    enable = stolen.post(f"/console/endpoints/{endpoint}/enable", data={"csrf_token": token})
    assert page.status_code == 302 and page.headers["Location"].startswith("/console/login")
    assert enable.status_code == 400 and "Reload the page" in enable.get_data(as_text=True)
    assert Endpoint.get_by_id(endpoint).disabled  # nothing changed
    assert not AuditEntry.select().where(AuditEntry.target_id == endpoint).exists()
    assert not PageSession.select().where(PageSession.subject == str(user.id)).exists()


def test_logging_out_ends_only_that_browsers_session(app: Flask, client: FlaskClient) -> None:
    user = staff("viewer")
    logged_in_browser(client, user.email)
    laptop = app.test_client()
    logged_in_browser(laptop, user.email)

    log_out(app, client, user.email)

    assert client.get("/console/").status_code == 302
    assert laptop.get("/console/").status_code == 200


def test_the_database_holds_a_hash_of_the_cookie_never_the_cookie(client: FlaskClient) -> None:
    user = staff("viewer")

    cookie, token = logged_in_browser(client, user.email)

    stored = PageSession.get(PageSession.subject == str(user.id))
    assert stored.id != cookie and len(stored.id) == 64 and cookie not in stored.id
    assert token != cookie


def test_a_new_password_can_log_in_and_the_old_one_cannot(app: Flask, client: FlaskClient) -> None:
    user = staff("operator")
    result = app.test_cli_runner().invoke(args=["staff", "set-password", user.email, "--password-stdin"],
                                          input="a brand new password\n")

    assert result.exit_code == 0, result.output
    assert log_in_with_form(client, user.email, PASSWORD).status_code == 401
    assert log_in_with_form(client, user.email, "a brand new password").status_code == 303


def test_a_disabled_account_cannot_log_in_and_enabling_it_lets_it_back(app: Flask, client: FlaskClient) -> None:
    user = staff("operator")
    runner = app.test_cli_runner()

    assert runner.invoke(args=["staff", "disable", user.email]).exit_code == 0
    refused = log_in_with_form(client, user.email, PASSWORD)
    assert runner.invoke(args=["staff", "enable", user.email]).exit_code == 0

    assert refused.status_code == 401 and StaffUser.get_by_id(user.id).active
    assert log_in_with_form(client, user.email, PASSWORD).status_code == 303
    assert "no staff account nobody@example.com" in runner.invoke(args=["staff", "disable", "nobody@example.com"]).output


def test_a_session_older_than_its_lifetime_is_over(client: FlaskClient) -> None:
    user = staff("viewer")
    logged_in_browser(client, user.email)

    PageSession.update(expires_at=utcnow() - timedelta(seconds=1)).execute()

    assert client.get("/console/").status_code == 302
