"""An email endpoint's attempts in the console and the portal, in a real headless Chromium, in SMTP
terms: the request is an SMTP send to the ``mailto:`` URL, the response the mail server's reply.

A real worker emails a real SMTP server (aiosmtpd) that defers the first email (451) and takes
the second (250). Screenshots go to ``artifacts/``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask
from playwright.sync_api import expect

from tests.api_helpers import create_endpoint, send
from tests.browser import ARTIFACTS, logged_in_page
from tests.conftest import wait_until
from tests.console_helpers import staff
from tests.portal_helpers import portal_link
from tests.smtp_server import SmtpServer
from webhooks.storage.models import Delivery

TO = "ops@example.com"


@pytest.fixture
def app(make_app: Callable[..., Flask], smtp: SmtpServer) -> Flask:
    """The app of the pages (and of ``client``), with the SMTP server as ``SMTP_URL``."""
    return make_app(smtp_url=smtp.url())


def test_an_email_endpoints_attempts_read_as_smtp_in_the_console_and_the_portal(
        browser: Any, base_url: str, app: Flask, client: Any, tenant: Any, auth: Any,
        make_settings: Callable[..., Any], start_worker: Any, smtp: SmtpServer) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    create_endpoint(client, auth(tenant), f"mailto:{TO}")
    smtp.inbox.data_replies = ["451 4.3.0 try again later"]
    start_worker(make_settings(smtp_url=smtp.url(), ladder="1s,1s"))
    event = send(client, auth(tenant), "order.created", {"order": 42})
    delivery = wait_until(lambda: Delivery.get_or_none(Delivery.event == event["id"], Delivery.status == "delivered"),
                          timeout=15)

    page = logged_in_page(browser, base_url, staff("operator").email)
    page.goto(f"{base_url}/console/events/{event['id']}")
    timeline = page.locator(f"[id='{delivery.id}']")
    expect(timeline.locator("tr.attempt")).to_have_count(2)
    expect(timeline.locator("tr.attempt").first).to_contain_text("the mail server deferred the email (SMTP 4xx)")
    timeline.get_by_text("Request and response of attempt 1").click()
    expect(timeline.locator("pre").filter(has_text="SMTP mailto:ops@example.com")).to_have_count(2)  # each attempt
    expect(timeline.locator("pre").filter(has_text="451 4.3.0 try again later")).to_have_count(1)
    page.screenshot(path=str(ARTIFACTS / "console-event-email.png"), full_page=True)

    portal = browser.new_context(viewport={"width": 1366, "height": 900}).new_page()
    portal.goto(base_url + portal_link(app, tenant))
    portal.goto(f"{base_url}/portal/events/{event['id']}")
    expect(portal.get_by_role("heading", name=f"To mailto:{TO}")).to_be_visible()
    expect(portal.locator("details.attempt summary").first).to_contain_text("SMTP 250 Message accepted for delivery")
    expect(portal.locator("details.attempt").first).to_contain_text(
        "The mail server answered 250 Message accepted for delivery")
    expect(portal.locator("details.attempt summary").nth(1)).to_contain_text("SMTP 451 4.3.0 try again later")
    portal.screenshot(path=str(ARTIFACTS / "portal-event-email.png"), full_page=True)
