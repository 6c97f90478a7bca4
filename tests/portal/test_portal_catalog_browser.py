"""The catalog in a real headless Chromium: the console's and the portal's catalog pages show each
type with its fields, its schema (collapsed) and its example, on a laptop and on a phone; in the
portal, a customer registers an endpoint by picking types from the catalog, sets a filter, tests it
(a match, and a miss that names the failed condition), sends an example and sees it arrive at a real
receiver, verified with the official ``standardwebhooks`` library. Screenshots go to ``docs/portal/``
(the portal's, shown in docs/customers.md) and ``artifacts/catalog/`` (the console's)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from flask import Flask
from playwright.sync_api import Browser, Page, expect
from standardwebhooks import Webhook

from tests.browser import ARTIFACTS, UNLABELLED, WATCH_CSP, logged_in_page, violations
from tests.catalog_helpers import ORDER, PAID_OVER_100, sample_catalog
from tests.console_helpers import staff
from tests.portal_helpers import portal_link
from tests.receivers import Receiver
from webhooks.config import Settings
from webhooks.storage.models import Endpoint

#: The portal's screenshots, committed and shown in docs/customers.md; the console's, to look at.
PORTAL_SHOTS = Path(__file__).resolve().parents[2] / "docs" / "portal"
CONSOLE_SHOTS = ARTIFACTS / "catalog"

#: A phone held upright, and a laptop.
WIDTHS = {"phone": 390, "laptop": 1280}


def problems_of(page: Page, width: int) -> list[str]:
    """CSP violations, controls a screen reader would not name, and a page wider than the window."""
    found = violations(page) + page.evaluate(UNLABELLED)
    scroll_width = page.evaluate("document.documentElement.scrollWidth")
    if scroll_width > width:
        found.append(f"{scroll_width} px wide at {width} px")
    return found


def shows_the_catalog(page: Page) -> None:
    """The order type under its group: its fields, its example open, its schema collapsed until asked."""
    expect(page.get_by_role("heading", name="orders (2)")).to_be_visible()
    card = page.locator("#type-order\\.paid")
    expect(card.get_by_role("cell", name="amount", exact=True)).to_be_visible()
    expect(card.get_by_role("cell", name="minimum 0")).to_be_visible()
    expect(card.locator("details.example pre")).to_contain_text('"currency": "eur"')
    schema = card.locator("details:not(.example) pre")
    expect(schema).to_be_hidden()
    card.get_by_text("JSON Schema (version 1)").click()
    expect(schema).to_contain_text('"$schema": "https://json-schema.org/draft/2020-12/schema"')
    fields = page.locator("#type-customer\\.created table.schema")
    expect(fields.locator("td.depth-2")).to_have_text("city")
    indents = [fields.locator(f"td.depth-{depth}").first.evaluate("cell => parseFloat(getComputedStyle(cell).paddingLeft)")
               for depth in (0, 1, 2)]
    assert indents == sorted(set(indents))  # each level further in than its parent
    expect(page.locator("#type-order\\.legacy .badge.deprecated")).to_be_visible()


def test_the_console_and_the_portal_show_each_types_fields_schema_and_example(
    browser: Browser, app: Flask, base_url: str, tenant: SimpleNamespace
) -> None:
    sample_catalog()
    PORTAL_SHOTS.mkdir(parents=True, exist_ok=True)
    CONSOLE_SHOTS.mkdir(parents=True, exist_ok=True)
    console = logged_in_page(browser, base_url, staff("viewer").email)
    portal = browser.new_context().new_page()
    portal.goto(base_url + portal_link(app, tenant, ["view"]))
    found = {}
    for page, url, shots in ((console, "/console/event-types", CONSOLE_SHOTS / "console-catalog"),
                             (portal, "/portal/event-types", PORTAL_SHOTS / "catalog")):
        page.add_init_script(WATCH_CSP)
        for size, width in WIDTHS.items():
            page.set_viewport_size({"width": width, "height": 900})
            page.goto(base_url + url)
            shows_the_catalog(page)
            page.screenshot(path=f"{shots}{'-phone' if size == 'phone' else ''}.png", full_page=True)
            if problems := problems_of(page, width):
                found[f"{url} at {width} px"] = problems
    console.context.close()
    portal.context.close()

    assert found == {}


def test_a_customer_picks_types_from_the_catalog_tests_a_filter_and_receives_an_example(
    browser: Browser, app: Flask, base_url: str, tenant: SimpleNamespace, settings: Settings, start_worker
) -> None:
    sample_catalog()
    start_worker(settings)
    page = browser.new_context(viewport={"width": WIDTHS["laptop"], "height": 900}).new_page()
    page.add_init_script(WATCH_CSP)
    page.goto(base_url + portal_link(app, tenant))
    with Receiver() as receiver:
        # Register an endpoint: the types from the catalog, by group, with their descriptions; a filter.
        page.get_by_role("link", name="Add an endpoint").click()
        expect(page.get_by_role("group", name="orders")).to_contain_text("An order was paid.")
        page.get_by_label("URL").fill(receiver.url + "/orders")
        page.get_by_role("checkbox", name="order.paid", exact=True).check()
        page.get_by_label("Filter (optional)").fill('{"data": {"amount": {"$gte": "a lot", "$in": 5}}}')
        page.get_by_role("button", name="Add the endpoint").click()
        expect(page.locator("#error-filter")).to_contain_text("Filter: data.amount.$in: ")
        page.screenshot(path=str(PORTAL_SHOTS / "endpoint-form-filter-error.png"), full_page=True)
        assert Endpoint.select().count() == 0
        page.get_by_label("Filter (optional)").fill(PAID_OVER_100)
        page.get_by_role("button", name="Add the endpoint").click()
        expect(page.get_by_role("heading", name=receiver.url + "/orders")).to_be_visible()
        endpoint = Endpoint.get()
        assert endpoint.event_types == ["order.paid"]
        assert endpoint.filter == {"data": {"currency": "eur", "amount": {"$gte": 100}}}
        page.screenshot(path=str(PORTAL_SHOTS / "endpoint-catalog.png"), full_page=True)

        # Test the filter: the type's example matches; an edited payload does not, and says why.
        page.get_by_role("link", name="Test the filter against an example event").click()
        expect(page.get_by_label("Payload (the event's data)")).to_have_value(json.dumps(ORDER, indent=2, sort_keys=True))
        page.get_by_role("button", name="Test the filter").click()
        expect(page.get_by_role("status")).to_contain_text("would be delivered")
        page.get_by_label("Payload (the event's data)").fill('{"amount": 50, "currency": "eur"}')
        page.get_by_role("button", name="Test the filter").click()
        expect(page.get_by_role("status")).to_contain_text("would not be delivered")
        expect(page.locator("code.failed-condition")).to_have_text(
            'data.amount: {"$gte": 100} does not hold; the value is 50')
        page.screenshot(path=str(PORTAL_SHOTS / "filter-test.png"), full_page=True)

        # Send the example: it arrives at the receiver, signed with the endpoint's secret.
        page.get_by_role("link", name="Back to the endpoint").click()
        page.get_by_role("button", name="Send an example of order.paid").click()
        expect(page.get_by_role("heading", name="order.paid")).to_be_visible()
        expect(page.get_by_text("Attempt 1:")).to_be_visible(timeout=20_000)
        (request,) = receiver.wait_for(1, timeout=10)
        verified = Webhook(Endpoint.get_by_id(endpoint.id).secret).verify(request.body, dict(request.headers))
        assert verified["type"] == "order.paid" and verified["data"] == ORDER
        page.screenshot(path=str(PORTAL_SHOTS / "example-sent.png"), full_page=True)
        assert violations(page) == []

        # The same pages on a phone: nothing wider than it, every control named, no CSP violation.
        page.set_viewport_size({"width": WIDTHS["phone"], "height": 800})
        found = {}
        for name, path in {"endpoint-form-catalog": "/portal/endpoints/new", "filter-test": f"/portal/endpoints/{endpoint.id}/filter",
                           "endpoint-catalog": f"/portal/endpoints/{endpoint.id}"}.items():
            page.goto(base_url + path)
            page.screenshot(path=str(PORTAL_SHOTS / f"{name}-phone.png"), full_page=True)
            if problems := problems_of(page, WIDTHS["phone"]):
                found[name] = problems
        assert found == {}
    page.context.close()
