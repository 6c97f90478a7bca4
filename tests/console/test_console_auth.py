"""Console staff accounts: login, session cookie, CSRF, roles, logout and the ``flask staff`` command."""

from __future__ import annotations

import json

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.console_helpers import PASSWORD, log_in, log_in_with_form, post_form, staff
from webhooks.console.auth import StaffError, create_staff
from webhooks.console.models import StaffUser


def test_console_pages_send_an_anonymous_visitor_to_the_login_form(client: FlaskClient) -> None:
    response = client.get("/console/search?q=evt_x")

    assert response.status_code == 302
    assert response.headers["Location"].startswith("/console/login?next=")


def test_login_sets_an_httponly_samesite_session_cookie_and_goes_where_asked(client: FlaskClient) -> None:
    user = staff("viewer")

    response = log_in_with_form(client, user.email, PASSWORD, next_path="/console/dead-letters")

    assert response.status_code == 303 and response.headers["Location"] == "/console/dead-letters"
    cookie = next(value for value in response.headers.getlist("Set-Cookie") if value.startswith("console_session="))
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Path=/console" in cookie
    assert "Secure" not in cookie  # plain HTTP here (see test_console_sessions for HTTPS)
    assert client.get("/console/").status_code == 200
    assert StaffUser.get_by_id(user.id).last_login_at is not None


def test_login_never_redirects_to_another_site(client: FlaskClient) -> None:
    user = staff("viewer")

    response = log_in_with_form(client, user.email, PASSWORD, next_path="//evil.example/console")

    assert response.headers["Location"] == "/console/"


def test_wrong_password_and_unknown_email_get_the_same_generic_answer(client: FlaskClient) -> None:
    user = staff("operator")

    wrong = log_in_with_form(client, user.email, "not the password")
    unknown = log_in_with_form(client, "nobody@example.com", "not the password")

    assert wrong.status_code == unknown.status_code == 401
    for response in (wrong, unknown):
        assert "Email or password is incorrect." in response.get_data(as_text=True)
    assert client.get("/console/").status_code == 302  # still not logged in


def test_a_post_without_or_with_a_stale_csrf_token_is_400(client: FlaskClient) -> None:
    log_in(client, "operator")

    missing = client.post("/console/logout")
    stale = client.post("/console/logout", data={"csrf_token": "a-token-from-another-session"})

    assert missing.status_code == stale.status_code == 400
    assert "<html" in missing.get_data(as_text=True) and "Reload the page" in missing.get_data(as_text=True)


def test_login_form_itself_needs_the_csrf_token(client: FlaskClient) -> None:
    user = staff("viewer")

    response = client.post("/console/login", data={"email": user.email, "password": PASSWORD})

    assert response.status_code == 400


def test_a_viewer_posting_an_operator_action_gets_403(client: FlaskClient, tenant, headers) -> None:
    from tests.console_helpers import failed_delivery

    delivery = failed_delivery(client, headers)
    log_in(client, "viewer")

    for path in (f"/console/deliveries/{delivery.id}/resend", f"/console/deliveries/{delivery.id}/replay",
                 f"/console/endpoints/{delivery.endpoint_id}/disable", f"/console/endpoints/{delivery.endpoint_id}/recover",
                 "/console/dead-letters/replay"):
        assert post_form(client, path).status_code == 403, path


def test_logout_ends_the_session(client: FlaskClient) -> None:
    log_in(client, "viewer")

    response = post_form(client, "/console/logout")

    assert response.status_code == 303
    assert client.get("/console/").status_code == 302


def test_a_deactivated_account_is_logged_out(client: FlaskClient) -> None:
    user = log_in(client, "operator")
    StaffUser.update(active=False).where(StaffUser.id == user.id).execute()

    assert client.get("/console/").status_code == 302


def test_passwords_are_stored_hashed(database_url: str) -> None:
    user = staff("viewer")

    assert PASSWORD not in user.password_hash and user.password_hash.startswith(("scrypt:", "pbkdf2:"))


@pytest.mark.parametrize(
    ("email", "password", "role"),
    [("no-at-sign", PASSWORD, "viewer"), ("a@example.com", "short", "viewer"), ("a@example.com", PASSWORD, "admin")],
)
def test_bad_staff_accounts_are_refused(database_url: str, email: str, password: str, role: str) -> None:
    with pytest.raises(StaffError):
        create_staff(email, password, role)


def test_flask_staff_create_reads_the_password_from_stdin_and_refuses_a_duplicate(app: Flask) -> None:
    runner = app.test_cli_runner()

    created = runner.invoke(args=["staff", "create", "Ops@Example.com", "--role", "operator", "--password-stdin"],
                            input=PASSWORD + "\n")
    again = runner.invoke(args=["staff", "create", "ops@example.com", "--password-stdin"], input=PASSWORD + "\n")

    assert created.exit_code == 0, created.output
    assert {k: v for k, v in json.loads(created.output).items() if k != "id"} == {
        "email": "ops@example.com", "role": "operator"}
    assert again.exit_code != 0 and "exists already" in again.output
    assert "ops@example.com\toperator" in runner.invoke(args=["staff", "list"]).output


def test_flask_staff_create_prompts_for_the_password_twice(app: Flask) -> None:
    result = app.test_cli_runner().invoke(args=["staff", "create", "v@example.com"], input=f"{PASSWORD}\n{PASSWORD}\n")

    assert result.exit_code == 0, result.output
    assert StaffUser.get(StaffUser.email == "v@example.com").role == "viewer"
