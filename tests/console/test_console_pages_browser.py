"""Every main console page in a real headless Chromium, on a laptop and on a phone: screenshots
under ``artifacts/console-pages/`` (to look at), no page wider than a 390 px phone, and not one
Content-Security-Policy violation (no inline script or style anywhere).
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page

from tests.api_helpers import make_attempt
from tests.console_helpers import failed_delivery, post_form, log_in, staff
from tests.browser import ARTIFACTS, UNLABELLED, WATCH_CSP, logged_in_page, violations
from tests.catalog_helpers import order_type
from webhooks.catalog import store
from webhooks.storage.models import Endpoint, HealthChange
from webhooks.storage.timeutil import utcnow

#: Where the screenshots go (``CONSOLE_SHOTS`` overrides it, to compare two versions side by side).
SHOTS = Path(os.environ.get("CONSOLE_SHOTS") or ARTIFACTS / "console-pages")

#: Width of a phone held upright, and of a laptop.
WIDTHS = {"phone": 390, "laptop": 1366}


def console_with_history(client, headers) -> dict[str, str]:
    """A dead letter with three failed attempts, an offline endpoint with its health history,
    and operator actions in the audit log; the paths of the pages that show them."""
    delivery = failed_delivery(client, headers, attempts=0, payload={"order": 42, "note": "<b>not bold</b>"})
    started = utcnow() - timedelta(minutes=40)
    for number, status in enumerate((500, 503, None), start=1):
        make_attempt(delivery.id, number, started_at=started + timedelta(minutes=number * 5), response_status=status,
                     error="HTTP %s" % status if status else "read timed out",
                     error_class="http_status" if status else "timeout", outcome="failed" if number == 3 else "retrying")
    Endpoint.update(health="offline", consecutive_failures=5, offline_since=utcnow()).where(
        Endpoint.id == delivery.endpoint_id).execute()
    HealthChange.create(endpoint=delivery.endpoint_id, tenant=delivery.tenant_id, from_state="online",
                        to_state="offline", reason="5 consecutive failures")
    from webhooks.storage.models import Delivery

    Delivery.update(status="failed", attempts=3, last_status_code=None, last_error="timeout: read timed out").where(
        Delivery.id == delivery.id).execute()
    log_in(client, "operator")
    post_form(client, f"/console/endpoints/{delivery.endpoint_id}/disable", {"reason": "customer asked"})
    post_form(client, "/console/dead-letters/replay", {"endpoint_id": delivery.endpoint_id})
    store.create(order_type(description="An order was paid: <b>not bold</b>, and a description long enough to wrap "
                                        "on a phone held upright."))
    return {
        "overview": "/console/",
        "event": f"/console/events/{delivery.event_id}",
        "endpoint": f"/console/endpoints/{delivery.endpoint_id}",
        "endpoints": "/console/endpoints",
        "search": "/console/search?q=acme",
        "search-error": "/console/search?since=yesterday-ish",
        "dead-letters": "/console/dead-letters",
        "replays": "/console/replays",
        "audit": "/console/audit",
        "event-types": "/console/event-types",
        "not-found": "/console/events/evt_nope",
    }


def test_every_main_page_fits_a_phone_and_breaks_no_content_security_policy(
    browser: Browser, base_url: str, client, headers  # noqa: F811 (fixtures)
) -> None:
    paths = console_with_history(client, headers)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = logged_in_page(browser, base_url, staff("operator").email)
    page.add_init_script(WATCH_CSP)
    found: dict[str, list[str]] = {}
    for size, width in WIDTHS.items():
        page.set_viewport_size({"width": width, "height": 900})
        for name, path in paths.items():
            page.goto(base_url + path)
            page.screenshot(path=str(SHOTS / f"{name}-{size}.png"), full_page=True)
            problems = violations(page)
            if width == WIDTHS["phone"] and page.evaluate("document.documentElement.scrollWidth") > width:
                problems.append(f"wider than the phone: {page.evaluate('document.documentElement.scrollWidth')} px")
            if problems:
                found[f"{name} at {width} px"] = problems

    assert found == {}


@pytest.mark.parametrize("width", WIDTHS.values())
def test_the_login_page_fits_and_breaks_no_content_security_policy(
    browser: Browser, base_url: str, width: int  # noqa: F811 (fixtures)
) -> None:
    page = browser.new_page(viewport={"width": width, "height": 800})
    page.add_init_script(WATCH_CSP)
    page.goto(f"{base_url}/console/login")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"login-{width}.png"), full_page=True)

    assert violations(page) == []
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    page.close()




def test_every_control_on_every_page_has_a_name_a_screen_reader_reads(
    browser: Browser, base_url: str, client, headers  # noqa: F811 (fixtures)
) -> None:
    paths = console_with_history(client, headers)
    page = logged_in_page(browser, base_url, staff("operator").email)
    found = {}
    for name, path in {**paths, "login": "/console/login"}.items():
        page.goto(base_url + path)
        if unnamed := page.evaluate(UNLABELLED):
            found[name] = unnamed

    assert found == {}


def tab_to(page: Page, selector: str, presses: int = 60) -> None:
    """Press Tab until the element matching ``selector`` has the focus (as a keyboard user would)."""
    for _ in range(presses):
        page.keyboard.press("Tab")
        if page.evaluate("selector => document.activeElement.matches(selector)", selector):
            return
    raise AssertionError(f"{selector} is not reachable with Tab")


def test_a_support_task_by_keyboard_alone_on_a_phone(
    browser: Browser, base_url: str, client, headers  # noqa: F811 (fixtures)
) -> None:
    """Log in, search an event, open it and resend its delivery: keys only, at 390 px wide."""
    from tests.console_helpers import PASSWORD

    delivery = failed_delivery(client, headers)
    user = staff("operator")
    page = browser.new_page(viewport={"width": WIDTHS["phone"], "height": 844})
    page.goto(f"{base_url}/console/")
    # The email field has the focus (autofocus), once the browser has applied it: on a loaded
    # machine keys typed before then went nowhere and the login was a 401.
    page.wait_for_function("document.activeElement && document.activeElement.id === 'email'")
    page.keyboard.type(user.email)
    tab_to(page, "#password")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_url(f"{base_url}/console/")

    tab_to(page, "input[name=q]")
    page.keyboard.type(delivery.event_id)
    page.keyboard.press("Enter")
    page.wait_for_url(f"{base_url}/console/events/{delivery.event_id}")
    tab_to(page, "button.primary")  # the delivery's Resend
    assert page.evaluate("document.activeElement.textContent") == "Resend"
    page.keyboard.press("Enter")
    page.get_by_text(f"Resend of {delivery.id} queued").wait_for()
    page.close()
