"""What keeps the portal safe: a view-only session sees no control and every change it POSTs is a
403 that changes nothing; another tenant's ids are 404 everywhere; framing only by the listed
origins, with cookies that work in their frames; CSRF on every form."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.api_helpers import create_endpoint, post_event, row_counts
from tests.portal_helpers import portal_client, portal_link, portal_post
from webhooks.console.models import AuditEntry
from webhooks.storage.models import Delivery, Endpoint


@pytest.fixture
def objects(client: FlaskClient, headers: dict[str, str]) -> SimpleNamespace:
    """An endpoint, an event and a failed delivery of ``tenant``."""
    endpoint = create_endpoint(client, headers)
    accepted = post_event(client, headers).json
    delivery = accepted["deliveries"][0]["id"]
    Delivery.update(status="failed").where(Delivery.id == delivery).execute()
    return SimpleNamespace(endpoint=endpoint["id"], event=accepted["id"], delivery=delivery)


def forms(o: SimpleNamespace) -> list[tuple[str, dict[str, str]]]:
    """Every form of a full session that changes something, with a valid body."""
    base = f"/portal/endpoints/{o.endpoint}"
    return [
        ("/portal/endpoints/new", {"url": "http://127.0.0.1:9/x"}),
        (f"{base}/edit", {"url": "http://127.0.0.1:9/y"}),
        (f"{base}/disable", {}), (f"{base}/enable", {}), (f"{base}/delete", {}),
        (f"{base}/secret/rotate", {}), (f"{base}/test", {}), (f"{base}/recover", {"since": "1h"}),
        (f"/portal/deliveries/{o.delivery}/resend", {}),
    ]


def test_a_view_only_session_sees_no_control_that_changes_anything(
    app: Flask, tenant: SimpleNamespace, objects: SimpleNamespace
) -> None:
    browser = portal_client(app, tenant, ["view"])

    for path in ("/portal/", f"/portal/endpoints/{objects.endpoint}", "/portal/events", f"/portal/events/{objects.event}"):
        page = browser.get(path).get_data(as_text=True)
        actions = set(re.findall(r'<form method="post"[^>]*action="([^"]+)"', page))
        assert actions == {"/portal/sign-out"}, path
        assert "Add an endpoint" not in page and "Edit endpoint" not in page and "Reveal the secret" not in page
    assert browser.get(f"/portal/endpoints/{objects.endpoint}/secret").status_code == 403


def test_every_change_a_view_only_session_posts_is_refused_and_changes_nothing(
    app: Flask, tenant: SimpleNamespace, objects: SimpleNamespace
) -> None:
    browser = portal_client(app, tenant, ["view"])
    before = (row_counts(), [(e.url, e.secret, e.disabled, e.deleted_at) for e in Endpoint.select()])

    for path, data in forms(objects):
        refused = portal_post(browser, path, data)
        assert refused.status_code == 403, path
        assert "Your access to this portal does not include this" in refused.get_data(as_text=True)

    assert (row_counts(), [(e.url, e.secret, e.disabled, e.deleted_at) for e in Endpoint.select()]) == before
    assert AuditEntry.select().count() == 0


@pytest.mark.parametrize("capability, allowed", [
    ("manage_endpoints", {"new", "edit", "disable", "enable", "delete", "test"}),
    ("rotate_secrets", {"rotate"}),
    ("resend", {"recover", "resend"}),
])
def test_each_capability_opens_its_own_forms_only(
    app: Flask, tenant: SimpleNamespace, objects: SimpleNamespace, capability: str, allowed: set[str]
) -> None:
    browser = portal_client(app, tenant, [capability])
    names = ["new", "edit", "disable", "enable", "delete", "rotate", "test", "recover", "resend"]

    refused = {name for name, (path, data) in zip(names, forms(objects)) if portal_post(browser, path, data).status_code == 403}

    assert refused == set(names) - allowed


def test_another_tenants_ids_are_not_found_whatever_the_url(
    app: Flask, other_tenant: SimpleNamespace, tenant: SimpleNamespace, objects: SimpleNamespace
) -> None:
    intruder = portal_client(app, other_tenant)
    base = f"/portal/endpoints/{objects.endpoint}"

    for path in (base, f"{base}/edit", f"{base}/secret", f"{base}/delete", f"/portal/events/{objects.event}"):
        assert intruder.get(path).status_code == 404, path
    for path, data in forms(objects)[1:]:
        assert portal_post(intruder, path, data).status_code == 404, path
    listed = intruder.get(f"/portal/events?endpoint_id={objects.endpoint}").get_data(as_text=True)
    assert objects.event not in listed and "No events match" in listed
    assert Endpoint.get_by_id(objects.endpoint).deleted_at is None


def test_a_form_without_the_sessions_token_is_refused(app: Flask, tenant: SimpleNamespace, objects: SimpleNamespace) -> None:
    browser = portal_client(app, tenant)

    refused = browser.post(f"/portal/endpoints/{objects.endpoint}/disable", data={"csrf_token": "forged"})

    assert refused.status_code == 400 and not Endpoint.get_by_id(objects.endpoint).disabled


def test_alone_the_portal_may_not_be_framed_and_its_cookie_is_lax(app: Flask, client: FlaskClient, tenant: SimpleNamespace) -> None:
    opened = client.get(portal_link(app, tenant))
    page = client.get("/portal/")

    assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
    assert "'unsafe-inline'" not in page.headers["Content-Security-Policy"]
    assert page.headers["X-Frame-Options"] == "DENY"
    cookie = opened.headers["Set-Cookie"]
    assert "SameSite=Lax" in cookie and "HttpOnly" in cookie and "Partitioned" not in cookie


def test_framed_by_the_listed_origins_with_a_cookie_that_works_in_their_frames(make_app, tenant: SimpleNamespace) -> None:  # type: ignore[no-untyped-def]
    app = make_app(portal_frame_ancestors="https://app.example.com https://*.example.org",
                   public_url="https://hooks.example.net")
    client = app.test_client()

    opened = client.get(portal_link(app, tenant), base_url="https://hooks.example.net")
    page = client.get("/portal/", base_url="https://hooks.example.net")

    assert "frame-ancestors https://app.example.com https://*.example.org" in page.headers["Content-Security-Policy"]
    assert "X-Frame-Options" not in page.headers
    cookie = opened.headers["Set-Cookie"]
    assert all(part in cookie for part in ("SameSite=None", "Secure", "Partitioned", "HttpOnly", "Path=/portal"))
    assert page.status_code == 200


def test_branding_is_on_every_page(make_app, tenant: SimpleNamespace) -> None:  # type: ignore[no-untyped-def]
    app = make_app(portal_brand_name="Acme Hooks", portal_logo_url="https://cdn.example.com/acme.png",
                   portal_accent="#ff6600")
    client = app.test_client()

    for page in (client.get("/portal/"), client.get("/portal/access/nothing"), client.get(portal_link(app, tenant)),
                 client.get("/portal/"), client.get("/portal/events")):
        if page.status_code == 303:
            continue
        body = page.get_data(as_text=True)
        assert "Acme Hooks" in body and 'src="https://cdn.example.com/acme.png"' in body
        assert "https://cdn.example.com" in page.headers["Content-Security-Policy"]
    assert "--accent: #ff6600" in client.get("/pages/brand/portal.css").get_data(as_text=True)


@pytest.mark.parametrize("variable, value", [
    ("portal_frame_ancestors", "app.example.com"),
    ("portal_accent", "orange"),
    ("portal_logo_url", "http://cdn.example.com/logo.png"),
])
def test_a_portal_setting_that_cannot_be_used_stops_the_web_process_naming_it(make_app, variable: str, value: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match="PORTAL_"):
        make_app(**{variable: value})
