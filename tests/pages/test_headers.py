"""Security headers on every response of the service (36.10): the API (the fast ingest path and
its refusals included), ``/docs``, files and pages; and the session cookie ``Secure`` whenever the
browser came over HTTPS, directly or through a trusted proxy."""

from __future__ import annotations

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.api_helpers import create_endpoint
from tests.console_helpers import PASSWORD, form_csrf, staff
from webhooks.pages.headers import DOCS_POLICY, NOTHING_POLICY

EVERY_RESPONSE = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin"}


def assert_locked_down(headers, policy: str = NOTHING_POLICY) -> None:
    assert headers["Content-Security-Policy"] == policy
    assert headers["X-Frame-Options"] == "DENY"
    for name, value in EVERY_RESPONSE.items():
        assert headers[name] == value, name


def test_api_answers_carry_the_headers_whatever_path_made_them(client: FlaskClient, headers) -> None:
    create_endpoint(client, headers)
    answers = {
        "fast ingest 202": client.post("/v1/events", json={"event_type": "a.b", "payload": {}}, headers=headers),
        "fast ingest 401": client.post("/v1/events", json={"event_type": "a.b", "payload": {}}),
        "views 200": client.get("/v1/endpoints", headers=headers),
        "views 422": client.post("/v1/endpoints", json={"url": "nope"}, headers=headers),
        "routing 404": client.get("/v1/nothing-here"),
        "health": client.get("/healthz"),
        "openapi": client.get("/openapi.json"),
        "favicon": client.get("/favicon.ico"),
        "docs asset": client.get("/docs/assets/swagger-ui.css"),
    }

    assert answers["fast ingest 202"].status_code == 202 and answers["fast ingest 401"].status_code == 401
    for name, response in answers.items():
        assert_locked_down(response.headers), name


def test_the_docs_page_may_run_the_services_own_scripts_only(client: FlaskClient) -> None:
    response = client.get("/docs")

    assert_locked_down(response.headers, DOCS_POLICY)
    page = response.get_data(as_text=True)
    assert "<script>" not in page and "style=" not in page and '<script src="/docs/init.js"></script>' in page
    assert client.get("/docs/init.js").status_code == 200


def session_cookies(response) -> list[str]:
    return [value for value in response.headers.getlist("Set-Cookie") if value.split("=")[0] in ("session", "console_session")]


def log_in_as_browser(client: FlaskClient, **request: object) -> list[str]:
    user = staff("viewer")
    token = form_csrf(client.get("/console/login", **request).get_data(as_text=True))
    response = client.post("/console/login", data={"csrf_token": token, "email": user.email, "password": PASSWORD},
                           **request)
    assert response.status_code == 303
    return session_cookies(response)


@pytest.mark.parametrize(("request_", "secure"), [
    ({}, False),
    ({"base_url": "https://console.example.com"}, True),
    ({"headers": {"X-Forwarded-Proto": "https"}, "environ_base": {"REMOTE_ADDR": "127.0.0.1"}}, True),
    ({"headers": {"X-Forwarded-Proto": "https"}, "environ_base": {"REMOTE_ADDR": "198.51.100.7"}}, False),
], ids=["http", "https", "https at a trusted proxy", "header from an untrusted peer"])
def test_session_cookies_are_secure_whenever_the_browser_used_https(client: FlaskClient, request_, secure: bool) -> None:
    cookies = log_in_as_browser(client, **request_)

    assert any(cookie.startswith("console_session=") for cookie in cookies)
    assert all(("; Secure" in cookie) is secure for cookie in cookies), cookies


def test_session_cookies_are_secure_when_the_public_url_is_https(make_app) -> None:
    app: Flask = make_app(public_url="https://webhooks.example.com")

    cookies = log_in_as_browser(app.test_client())

    assert cookies and all("; Secure" in cookie for cookie in cookies)


def test_only_the_listed_proxies_are_trusted(make_app) -> None:
    app: Flask = make_app(forwarded_allow_ips="10.0.0.5")
    forwarded = {"headers": {"X-Forwarded-Proto": "https"}}

    from_listed = log_in_as_browser(app.test_client(), environ_base={"REMOTE_ADDR": "10.0.0.5"}, **forwarded)
    from_loopback = log_in_as_browser(app.test_client(), environ_base={"REMOTE_ADDR": "127.0.0.1"}, **forwarded)

    assert all("; Secure" in cookie for cookie in from_listed)
    assert not any("; Secure" in cookie for cookie in from_loopback)
