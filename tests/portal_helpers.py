"""Opening portal sessions in tests: a link made with ``create_link``, opened by a test client."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from webhooks.pages import csrf, sessions
from webhooks.portal import access
from webhooks.storage.models import Tenant


def portal_link(app: Flask, tenant: SimpleNamespace, capabilities: list[str] | None = None) -> str:
    """The path of a new one-time link to ``tenant``'s portal."""
    with app.app_context():
        return urlsplit(access.create_link(Tenant.get_by_id(tenant.id), capabilities).url).path


def portal_client(app: Flask, tenant: SimpleNamespace, capabilities: list[str] | None = None) -> FlaskClient:
    """A browser with a portal session of ``tenant`` (every capability unless told)."""
    client = app.test_client()
    assert client.get(portal_link(app, tenant, capabilities)).status_code == 303
    return client


def portal_csrf(client: FlaskClient) -> str:
    cookie = client.get_cookie("portal_session", path="/portal")
    assert cookie is not None, "the client has no portal session"
    return csrf.session_token(client.application.config["SECRET_KEY"], sessions.digest(cookie.value))


def portal_post(client: FlaskClient, path: str, data: dict[str, Any] | None = None) -> TestResponse:
    """POST a portal form with the session's CSRF token."""
    return client.post(path, data={"csrf_token": portal_csrf(client), **(data or {})})
