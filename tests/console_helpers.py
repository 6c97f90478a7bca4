"""Helpers of the console tests: staff sessions without the login form, dead letters, form posts."""

from __future__ import annotations

import itertools
import re
import secrets
from datetime import timedelta
from typing import Any

from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from tests.api_helpers import create_endpoint, make_attempt, post_event
from webhooks.console.auth import create_staff
from webhooks.console.blueprint import SITE
from webhooks.console.models import StaffUser
from webhooks.pages import csrf, sessions
from webhooks.pages.models import PageSession
from webhooks.storage.models import Delivery
from webhooks.storage.timeutil import utcnow

#: Every test account has this password.
PASSWORD = "correct horse battery"

_emails = itertools.count(1)


def staff(role: str = "operator", email: str | None = None) -> StaffUser:
    """A new staff account (password ``PASSWORD``)."""
    return create_staff(email or f"{role}{next(_emails)}@example.com", PASSWORD, role)


def log_in(client: FlaskClient, role: str = "operator") -> StaffUser:
    """Give ``client`` a session of a new staff user (as the login form would) and return the user."""
    user = staff(role)
    token = secrets.token_urlsafe(32)
    PageSession.create(id=sessions.digest(token), site="console", subject=str(user.id),
                       expires_at=utcnow() + timedelta(hours=1))
    client.set_cookie(SITE.cookie_name, token, path="/console")
    return user


def csrf_of(client: FlaskClient) -> str:
    """The CSRF token of ``client``'s console session (what its pages put in their forms)."""
    token = client.get_cookie(SITE.cookie_name, path="/console")
    assert token is not None, "the client has no console session"
    return csrf.session_token(client.application.config["SECRET_KEY"], sessions.digest(token.value))


def form_csrf(page: str) -> str:
    """The CSRF token a page puts in its form."""
    match = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert match, "the page has no CSRF token"
    return match.group(1)


def log_in_with_form(client: FlaskClient, email: str, password: str, next_path: str = "") -> TestResponse:
    """Log in through the console's login form, as a person does; the form's answer."""
    token = form_csrf(client.get("/console/login").get_data(as_text=True))
    return client.post("/console/login", data={"csrf_token": token, "email": email, "password": password,
                                               "next": next_path})


def post_form(client: FlaskClient, path: str, data: dict[str, str] | None = None, **kwargs: Any) -> TestResponse:
    """POST a console form with the session's CSRF token."""
    return client.post(path, data={"csrf_token": csrf_of(client), **(data or {})}, **kwargs)


def failed_delivery(client: FlaskClient, headers: dict[str, str], *, attempts: int = 3, **event: Any) -> Delivery:
    """A delivery that went through ``attempts`` failed attempts and is now a dead letter."""
    create_endpoint(client, headers)
    response = post_event(client, headers, **event)
    delivery_id = response.json["deliveries"][0]["id"]
    for number in range(1, attempts + 1):
        make_attempt(delivery_id, number, outcome="retrying" if number < attempts else "failed")
    Delivery.update(status="failed", attempts=attempts, last_status_code=500, next_attempt_at=None).where(
        Delivery.id == delivery_id
    ).execute()
    return Delivery.get_by_id(delivery_id)
