"""Portal access: one-time links, sessions of one tenant that end together, capabilities."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest
from flask import Flask
from flask.testing import FlaskClient

from webhooks.pages.models import PageSession
from webhooks.portal import access, capabilities
from webhooks.portal.models import PortalLink
from webhooks.storage.models import Tenant
from webhooks.storage.timeutil import utcnow

from tests.console_helpers import form_csrf


def link_for(app: Flask, tenant: SimpleNamespace, caps: list[str] | None = None, **kwargs: object) -> access.AccessLink:
    with app.app_context():
        return access.create_link(Tenant.get_by_id(tenant.id), caps, **kwargs)  # type: ignore[arg-type]


def path_of(link: access.AccessLink) -> str:
    return urlsplit(link.url).path


def test_a_link_is_a_url_on_the_public_url_that_expires_in_ten_minutes_by_default(app: Flask, tenant: SimpleNamespace) -> None:
    link = link_for(app, tenant)

    assert link.url.startswith("http://localhost:8000/portal/access/")
    assert timedelta(minutes=9) < link.expires_at - utcnow() <= timedelta(minutes=10)
    assert link.capabilities == capabilities.ALL


def test_only_the_hash_of_a_link_is_stored(app: Flask, tenant: SimpleNamespace) -> None:
    link = link_for(app, tenant)
    token = path_of(link).rsplit("/", 1)[1]

    stored = PortalLink.get()
    assert stored.id != token and token not in stored.id
    assert stored.id == access.sessions.digest(token)


@pytest.mark.parametrize("asked, given", [
    (None, capabilities.ALL),
    ([], ("view",)),
    (["resend", "view_secrets"], ("view", "view_secrets", "resend")),
])
def test_capabilities_default_to_all_and_always_include_view(
    app: Flask, tenant: SimpleNamespace, asked: list[str] | None, given: tuple[str, ...]
) -> None:
    assert link_for(app, tenant, asked).capabilities == given


def test_an_unknown_capability_is_an_error_naming_it_and_the_field(app: Flask, tenant: SimpleNamespace) -> None:
    with pytest.raises(access.AccessError) as raised:
        link_for(app, tenant, ["view", "delete_everything"])

    assert raised.value.field == "capabilities"
    assert "'delete_everything'" in str(raised.value) and "manage_endpoints" in str(raised.value)
    assert isinstance(raised.value, ValueError)
    assert PortalLink.select().count() == 0


@pytest.mark.parametrize("expires_in", [0, 29, 7 * 86_400 + 1, "600", 1.5, True])
def test_expires_in_must_be_whole_seconds_within_bounds(app: Flask, tenant: SimpleNamespace, expires_in: object) -> None:
    with pytest.raises(access.AccessError) as raised:
        link_for(app, tenant, expires_in=expires_in)

    assert raised.value.field == "expires_in"


def test_opening_a_link_starts_a_session_of_its_tenant_and_goes_to_the_portal(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace
) -> None:
    link = link_for(app, tenant, ["manage_endpoints"])

    opened = client.get(path_of(link))

    assert opened.status_code == 303 and opened.headers["Location"] == "/portal/"
    cookie = opened.headers["Set-Cookie"]
    assert cookie.startswith("portal_session=") and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert "Path=/portal" in cookie
    row = PageSession.get()
    assert (row.site, row.subject, row.data) == ("portal", tenant.id, {"capabilities": ["view", "manage_endpoints"]})
    assert timedelta(hours=11, minutes=59) < row.expires_at - utcnow() <= timedelta(hours=12)
    page = client.get("/portal/")
    assert page.status_code == 200 and "acme" in page.get_data(as_text=True)


def test_a_link_opens_once(app: Flask, client: FlaskClient, tenant: SimpleNamespace) -> None:
    link = link_for(app, tenant)
    client.get(path_of(link))

    again = app.test_client().get(path_of(link))

    assert again.status_code == 410
    assert "This link has already been used" in again.get_data(as_text=True)
    assert PageSession.select().count() == 1


def test_a_used_link_opened_again_in_the_browser_it_signed_in_goes_on_to_the_portal(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace
) -> None:
    link = link_for(app, tenant)
    client.get(path_of(link))

    again = client.get(path_of(link))

    assert again.status_code == 303 and again.headers["Location"] == "/portal/"
    assert PageSession.select().count() == 1


def test_an_expired_link_opens_nothing(app: Flask, client: FlaskClient, tenant: SimpleNamespace) -> None:
    link = link_for(app, tenant)
    PortalLink.update(expires_at=utcnow() - timedelta(seconds=1)).execute()

    opened = client.get(path_of(link))

    assert opened.status_code == 410 and "This link has expired" in opened.get_data(as_text=True)
    assert PageSession.select().count() == 0


def test_a_made_up_link_is_not_found(client: FlaskClient, database_url: str) -> None:
    opened = client.get("/portal/access/not-a-token")

    assert opened.status_code == 404 and "This link is not valid" in opened.get_data(as_text=True)


def test_without_a_session_the_portal_says_how_to_get_in(client: FlaskClient, database_url: str) -> None:
    page = client.get("/portal/")

    assert page.status_code == 401 and "Open the portal from your link" in page.get_data(as_text=True)


def test_ending_sessions_ends_every_session_of_the_tenant_and_only_its(
    app: Flask, tenant: SimpleNamespace, other_tenant: SimpleNamespace
) -> None:
    first, second, other = app.test_client(), app.test_client(), app.test_client()
    first.get(path_of(link_for(app, tenant)))
    second.get(path_of(link_for(app, tenant)))
    other.get(path_of(link_for(app, other_tenant)))
    unopened = link_for(app, tenant)

    assert access.end_sessions(Tenant.get_by_id(tenant.id)) == 2

    for browser in (first, second):
        page = browser.get("/portal/")
        assert page.status_code == 401 and "Your session has ended" in page.get_data(as_text=True)
    assert other.get("/portal/").status_code == 200
    assert app.test_client().get(path_of(unopened)).status_code == 410


def test_a_session_lasts_the_portal_session_ttl(make_app, tenant: SimpleNamespace) -> None:  # type: ignore[no-untyped-def]
    app = make_app(portal_session_ttl=60.0)
    client = app.test_client()
    client.get(path_of(link_for(app, tenant)))

    assert timedelta(seconds=50) < PageSession.get().expires_at - utcnow() <= timedelta(seconds=60)
    PageSession.update(expires_at=utcnow() - timedelta(seconds=1)).execute()
    assert client.get("/portal/").status_code == 401


def test_a_console_session_does_not_open_the_portal(app: Flask, client: FlaskClient, tenant: SimpleNamespace) -> None:
    from tests.console_helpers import log_in

    log_in(client)

    assert client.get("/portal/").status_code == 401


def test_signing_out_ends_the_session(app: Flask, client: FlaskClient, tenant: SimpleNamespace) -> None:
    client.get(path_of(link_for(app, tenant)))
    token = form_csrf(client.get("/portal/").get_data(as_text=True))

    out = client.post("/portal/sign-out", data={"csrf_token": token})

    assert out.status_code == 303 and PageSession.select().count() == 0
    assert "You are signed out" in client.get(out.headers["Location"]).get_data(as_text=True)


def test_the_command_line_makes_links_and_ends_sessions(app: Flask, tenant: SimpleNamespace) -> None:
    import json

    runner = app.test_cli_runner()

    made = runner.invoke(args=["tenant", "portal-link", "acme", "--capability", "resend", "--expires-in", "60"])
    link = json.loads(made.output)
    app.test_client().get(urlsplit(link["url"]).path)
    ended = runner.invoke(args=["tenant", "end-portal-sessions", tenant.id])
    refused = runner.invoke(args=["tenant", "portal-link", "acme", "--expires-in", "5"])

    assert link["capabilities"] == ["view", "resend"] and link["url"].startswith("http://localhost:8000/portal/access/")
    assert json.loads(ended.output) == {"ended": 1}
    assert refused.exit_code == 2 and "expires_in must be a whole number of seconds from 30" in refused.output
