"""Browser fixtures and page checks shared by the browser tests (Chromium through Playwright).

Registered as a plugin in ``tests/conftest.py``: ``base_url`` and ``browser`` are fixtures
every test may ask for, without importing them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright
from werkzeug.serving import make_server

from tests.console_helpers import PASSWORD

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


@pytest.fixture
def base_url(app) -> Iterator[str]:
    """The app served by a real threaded HTTP server on 127.0.0.1."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="console-server", daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def logged_in_page(browser: Browser, base_url: str, email: str) -> Page:
    page = browser.new_context(viewport={"width": 1366, "height": 900}).new_page()
    page.goto(f"{base_url}/console/")
    expect(page.get_by_role("heading", name="Support console")).to_be_visible()
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Overview", exact=True)).to_be_visible()
    return page


#: Records every CSP violation of the page in ``window.cspViolations`` (run before any page script).
WATCH_CSP = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation",
    event => window.cspViolations.push(`${event.violatedDirective} ${event.blockedURI} ${event.sample}`));
"""


def violations(page: Page) -> list[str]:
    return page.evaluate("window.cspViolations")


#: Each visible form control without a name a screen reader would read (a label, aria-label or aria-labelledby),
#: and each button or link without text.
UNLABELLED = """() => [...document.querySelectorAll("input:not([type=hidden]), select, textarea, button, a[href]")]
    .filter(element => element.offsetParent !== null)
    .filter(element => {
        const name = element.getAttribute("aria-label") || element.getAttribute("aria-labelledby")
            || (element.labels && [...element.labels].map(label => label.textContent).join("").trim())
            || (["BUTTON", "A"].includes(element.tagName) && element.textContent.trim());
        return !name;
    })
    .map(element => element.outerHTML.slice(0, 120))"""
