"""The portal in a real headless Chromium, embedded in another origin's page: a platform key creates
a tenant and its endpoint, posts events for it and asks for portal access; the customer opens the
link inside the platform's iframe, registers an endpoint, sends a test event and sees its
attempt, rotates the secret, and a receiver verifies with the official ``standardwebhooks``
library. A view-only session has no controls; used, expired and ended links have their pages.
Screenshots of every page go to ``docs/portal/`` (shown in docs/platforms.md)."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest
from flask import Flask
from playwright.sync_api import Browser, FrameLocator, Page, expect
from standardwebhooks import Webhook

from tests.api_helpers import create_endpoint as register
from tests.api_helpers import send
from tests.browser import UNLABELLED, WATCH_CSP, violations
from tests.conftest import wait_until
from tests.portal_helpers import portal_link
from tests.receivers import Receiver, always
from webhooks.pages.models import PageSession
from webhooks.portal import access
from webhooks.portal.models import PortalLink
from webhooks.storage.models import Attempt, Endpoint, Tenant
from webhooks.storage.timeutil import utcnow

#: Screenshots of each portal page, committed and shown in docs/platforms.md.
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "portal"

PHONE = 390


class Embedder:
    """The platform's own site on another origin (``localhost``): a settings page that frames the portal."""

    def __init__(self) -> None:
        self.src = "about:blank"
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                body = (f"<!doctype html><title>Acme settings</title><h1>Acme · Webhooks settings</h1>"
                        f'<iframe title="Webhooks portal" src="{outer.src}" width="1200" height="1500"></iframe>').encode()
                self.send_response(200)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://localhost:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def embedder() -> Iterator[Embedder]:
    site = Embedder()
    yield site
    site.close()


@pytest.fixture
def app(make_app: Callable[..., Flask], embedder: Embedder) -> Flask:
    """The app, framed only by the embedder, with the platform's brand (``base_url`` serves it)."""
    return make_app(portal_frame_ancestors=embedder.origin, portal_brand_name="Acme Webhooks", portal_accent="#0f766e",
                    portal_logo_url="/portal/static/logo.svg")


def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def phone_problems(browser: Browser, link: str, pages: dict[str, str]) -> dict[str, list[str]]:
    """Each page opened alone at 390 px (after the link): wider than the phone, a CSP violation, or a
    control a screen reader would not name; its phone screenshot."""
    context = browser.new_context(viewport={"width": PHONE, "height": 800})
    page = context.new_page()
    page.add_init_script(WATCH_CSP)
    page.goto(link)
    found = {}
    for name, url in pages.items():
        page.goto(url)
        shot(page, f"{name}-phone")
        problems = violations(page) + page.evaluate(UNLABELLED)
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > PHONE:
            problems.append(f"{width} px wide")
        if problems:
            found[name] = problems
    context.close()
    return found


def test_a_platform_brings_its_customer_into_the_portal_embedded_in_its_own_page(
    browser: Browser, app: Flask, base_url: str, embedder: Embedder, client, platform: dict[str, str],
    settings, start_worker,
) -> None:
    with Receiver(always(204)) as first, Receiver(always(204)) as second:
        # The platform's backend, with its platform key: a tenant for its customer, an endpoint, events, a link.
        created = client.post("/v1/tenants", json={"name": "Globex", "uid": "cus_42"}, headers=platform)
        assert created.status_code == 201, created.json
        tenant = SimpleNamespace(id=created.json["id"])
        acting = "/v1/tenants/cus_42"
        register(client, platform, first.url + "/orders", prefix=acting, event_types=["order.created"])
        for n in range(3):
            send(client, platform, "order.created", payload={"order": n}, prefix=acting)
        send(client, platform, "invoice.paid", payload={"invoice": 7}, prefix=acting)
        start_worker(settings)
        access = client.post(f"{acting}/portal-access", json={}, headers=platform)
        assert access.status_code == 201, access.json
        embedder.src = base_url + urlsplit(access.json["url"]).path

        context = browser.new_context(viewport={"width": 1280, "height": 1700})
        page = context.new_page()
        page.add_init_script(WATCH_CSP)
        page.goto(embedder.origin + "/")
        frame: FrameLocator = page.frame_locator("iframe")
        expect(frame.get_by_role("heading", name="Endpoints")).to_be_visible()
        expect(frame.get_by_text("Acme Webhooks")).to_be_visible()
        shot(page, "embedded")

        # Register a second endpoint, for invoices, picking the type from those sent (with their counts).
        frame.get_by_role("link", name="Add an endpoint").click()
        expect(frame.get_by_text("(3 sent)")).to_be_visible()
        frame.get_by_label("URL").fill("ftp://example.com/hooks")
        frame.get_by_role("button", name="Add the endpoint").click()
        expect(frame.get_by_role("heading", name="There is a problem")).to_be_visible()
        shot(page, "endpoint-form-errors")
        frame.get_by_label("URL").fill(second.url + "/invoices")
        frame.get_by_label("invoice.paid").check()
        frame.get_by_label("Description (optional)").fill("Invoices to our billing system")
        frame.get_by_role("button", name="Add the endpoint").click()
        expect(frame.get_by_role("heading", name=second.url + "/invoices")).to_be_visible()
        endpoint = Endpoint.get(Endpoint.url == second.url + "/invoices")
        assert endpoint.event_types == ["invoice.paid"] and endpoint.tenant_id == tenant.id

        # Send a test event: its page shows the attempt once it lands (it reloads itself until then).
        frame.get_by_role("button", name="Send a test event").click()
        expect(frame.get_by_role("heading", name="webhook.test")).to_be_visible()
        expect(frame.get_by_text("Attempt 1:")).to_be_visible(timeout=20_000)
        expect(frame.get_by_text("webhook-signature: v1,")).to_be_visible()
        shot(page, "event")
        (test_request,) = second.wait_for(1, timeout=10)
        assert json.loads(test_request.body)["type"] == "webhook.test"

        # Rotate the secret; a receiver verifies the next request with the official library and the new secret.
        frame.get_by_role("link", name="Endpoints").click()
        frame.get_by_role("link", name=second.url + "/invoices").click()
        frame.get_by_role("button", name="Rotate the secret").click()
        expect(frame.get_by_text("Secret rotated.")).to_be_visible()
        new_secret = frame.locator("#secret-value").inner_text()
        assert new_secret == Endpoint.get_by_id(endpoint.id).secret != endpoint.secret
        shot(page, "endpoint")
        event = send(client, platform, "invoice.paid", payload={"invoice": 8}, prefix=acting)
        request = next(r for r in second.wait_for(2, timeout=15) if r.headers["webhook-id"] == event["id"])
        assert Webhook(new_secret).verify(request.body, dict(request.headers)) == {
            "type": "invoice.paid", "timestamp": json.loads(request.body)["timestamp"], "data": {"invoice": 8}}

        frame.get_by_role("link", name="Event log").click()
        expect(frame.get_by_role("heading", name="Event log")).to_be_visible()
        expect(frame.get_by_text("Events, newest first")).to_be_visible()
        page.wait_for_timeout(300)  # the frame's new page painted before the screenshot
        shot(page, "events")
        # A third endpoint that is down: what waits for it, and how long it takes to catch up once back.
        down = register(client, platform, "http://127.0.0.1:9/shipments", prefix=acting, event_types=["shipment.sent"])
        Endpoint.update(health="offline", offline_since=utcnow() - timedelta(minutes=12)).where(
            Endpoint.id == down["id"]).execute()
        for n in range(3):
            send(client, platform, "shipment.sent", payload={"shipment": n}, prefix=acting)
        frame.get_by_role("link", name="Endpoints").click()
        expect(frame.get_by_text("Invoices to our billing system")).to_be_visible()
        expect(frame.get_by_text("3 waiting since")).to_be_visible()
        wait_until(lambda: Attempt.select().where(Attempt.endpoint == endpoint.id).count() >= 2, timeout=10)
        frame.get_by_role("link", name="Endpoints").click()
        expect(frame.get_by_text("of 2", exact=False).first).to_be_visible()
        shot(page, "endpoints")

        assert violations(page) == []
        portal_cookies = [c for c in context.cookies() if c["name"] == "portal_session"]
        assert portal_cookies and portal_cookies[0]["sameSite"] == "None" and portal_cookies[0]["httpOnly"]

        # The same pages, alone, on a phone.
        pages = {"endpoints": "/portal/", "endpoint": f"/portal/endpoints/{endpoint.id}", "events": "/portal/events",
                 "endpoint-form": "/portal/endpoints/new", "event": f"/portal/events/{event['id']}"}
        link = base_url + portal_link(app, tenant)
        assert phone_problems(browser, link, {name: base_url + path for name, path in pages.items()}) == {}
        context.close()


def test_a_view_only_session_has_no_controls(
    browser: Browser, app: Flask, base_url: str, client, tenant: SimpleNamespace, auth
) -> None:
    register(client, auth(tenant), "http://127.0.0.1:9/orders")
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
    page.goto(base_url + portal_link(app, tenant, ["view"]))
    page.get_by_role("link", name="http://127.0.0.1:9/orders").click()

    assert page.get_by_role("button").all_inner_texts() == ["Sign out"]
    expect(page.get_by_text("Your access does not include seeing the secret.")).to_be_visible()
    shot(page, "endpoint-view-only")
    page.context.close()


def test_used_expired_and_ended_links_each_have_their_page_and_another_tenants_ids_are_not_found(
    browser: Browser, app: Flask, base_url: str, client, auth, tenant: SimpleNamespace,
    other_tenant: SimpleNamespace,
) -> None:
    endpoint = register(client, auth(tenant), "http://127.0.0.1:9/orders")
    event = send(client, auth(tenant))
    customer = browser.new_context(viewport={"width": 1000, "height": 700}).new_page()
    link = base_url + portal_link(app, tenant)
    customer.goto(link)
    expect(customer.get_by_role("heading", name="Endpoints")).to_be_visible()

    stranger = browser.new_context(viewport={"width": 1000, "height": 700}).new_page()
    stranger.goto(link)
    expect(stranger.get_by_role("heading", name="This link has already been used")).to_be_visible()
    shot(stranger, "link-used")

    expired = base_url + portal_link(app, tenant)
    PortalLink.update(expires_at=utcnow() - timedelta(seconds=1)).where(PortalLink.used_at.is_null()).execute()
    stranger.goto(expired)
    expect(stranger.get_by_role("heading", name="This link has expired")).to_be_visible()
    shot(stranger, "link-expired")

    assert access.end_sessions(Tenant.get_by_id(tenant.id)) == 1
    customer.goto(base_url + "/portal/")
    expect(customer.get_by_role("heading", name="Your session has ended")).to_be_visible()
    shot(customer, "session-ended")
    assert PageSession.select().count() == 0

    stranger.goto(base_url + portal_link(app, other_tenant))
    for path in (f"/portal/endpoints/{endpoint['id']}", f"/portal/events/{event['id']}"):
        assert stranger.goto(base_url + path).status == 404
    expect(stranger.get_by_role("heading", name="Page not found")).to_be_visible()
    customer.context.close()
    stranger.context.close()


def tab_to(page: Page, name: str, limit: int = 40) -> None:
    """Press Tab until the focused element's text or label is ``name`` (keyboard only)."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        focused = page.evaluate("""() => { const e = document.activeElement;
            return (e.labels && e.labels.length ? e.labels[0].textContent : e.textContent || '').trim(); }""")
        if focused == name:
            return
    raise AssertionError(f"{name!r} cannot be reached with Tab")


def test_a_customer_adds_an_endpoint_and_sends_a_test_event_by_keyboard_alone(
    browser: Browser, app: Flask, base_url: str, tenant: SimpleNamespace
) -> None:
    page = browser.new_context(viewport={"width": PHONE, "height": 800}).new_page()
    page.goto(base_url + portal_link(app, tenant))

    tab_to(page, "Add an endpoint")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Add an endpoint")).to_be_visible()
    tab_to(page, "URL")
    page.keyboard.type("http://127.0.0.1:9/by-keyboard")
    tab_to(page, "Add the endpoint")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="http://127.0.0.1:9/by-keyboard")).to_be_visible()
    tab_to(page, "Send a test event")
    page.keyboard.press("Enter")

    expect(page.get_by_role("heading", name="webhook.test")).to_be_visible()
    page.context.close()
