"""The console's layout in a real headless Chromium: favicon, whole placeholders, no overflow on a phone."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Page

from tests.console_helpers import failed_delivery, staff
from tests.browser import ARTIFACTS, logged_in_page

#: Width of a phone held upright (an iPhone 12 to 15).
PHONE_WIDTH = 390

#: Whether the input's placeholder, typed in as its value, would scroll: [scrollWidth, clientWidth].
#: (Typed text is drawn like the placeholder; ``scrollWidth`` counts what the inner box cuts off.)
PLACEHOLDER_AS_VALUE = """input => {
    const saved = input.value;
    input.value = input.placeholder;
    const widths = [input.scrollWidth, input.clientWidth];
    input.value = saved;
    return widths;
}"""

#: Each console table whose right or left edge leaves its card (or the page), with the overshoot.
OVERFLOWING_TABLES = """() => {
    const page = document.documentElement.clientWidth;
    return [...document.querySelectorAll("table")].flatMap(table => {
        const box = table.getBoundingClientRect();
        const card = (table.closest(".card") || document.querySelector("main")).getBoundingClientRect();
        const over = Math.max(box.right - card.right, card.left - box.left, box.right - page);
        return over > 0.5 ? [`${table.className || "table"}: ${over}px`] : [];
    });
}"""


def placeholders_cut_off(page: Page) -> list[str]:
    """The placeholders on ``page`` that do not fit in their input."""
    cut = []
    for input_ in page.locator("input[placeholder]:visible").all():
        scroll_width, client_width = input_.evaluate(PLACEHOLDER_AS_VALUE)
        if scroll_width > client_width:
            cut.append(f"{input_.get_attribute('placeholder')!r}: {scroll_width}px in {client_width}px")
    return cut


def test_every_page_has_a_favicon_the_browser_can_draw(browser: Browser, base_url: str) -> None:  # noqa: F811
    page = browser.new_page()
    response = page.goto(f"{base_url}/console/login")
    assert response is not None and response.ok

    favicon = page.request.get(f"{base_url}/favicon.ico")
    size = page.evaluate("""() => new Promise((resolve, reject) => {
        const image = new Image();
        image.onload = () => resolve([image.naturalWidth, image.naturalHeight]);
        image.onerror = () => reject(new Error("favicon.ico is not an image"));
        image.src = "/favicon.ico";
    })""")

    assert favicon.status == 200
    assert favicon.headers["content-type"].startswith("image/")
    assert size[0] >= 16 and size[0] == size[1]
    page.close()


@pytest.mark.parametrize("width", [1366, 1024, PHONE_WIDTH])
def test_search_reason_and_filter_placeholders_are_shown_whole(
    browser: Browser, base_url: str, client, headers, width: int  # noqa: F811
) -> None:
    delivery = failed_delivery(client, headers)
    page = logged_in_page(browser, base_url, staff("operator").email)
    page.set_viewport_size({"width": width, "height": 900})

    for path in ("/console/", f"/console/endpoints/{delivery.endpoint_id}", "/console/endpoints",
                 "/console/search?q=acme", "/console/dead-letters"):
        page.goto(base_url + path)
        assert page.get_by_label("Search", exact=True).is_visible()
        assert placeholders_cut_off(page) == [], path
        if "/endpoints/" in path:
            assert page.get_by_label("Reason for disabling").is_visible()


def test_on_a_phone_the_attempts_table_stays_inside_its_card(
    browser: Browser, base_url: str, client, headers  # noqa: F811
) -> None:
    delivery = failed_delivery(client, headers, attempts=4)
    page = logged_in_page(browser, base_url, staff("operator").email)
    page.set_viewport_size({"width": PHONE_WIDTH, "height": 844})
    page.goto(f"{base_url}/console/events/{delivery.event_id}")
    timeline = page.locator(f"[id='{delivery.id}'] table.timeline")
    timeline.locator("tr.attempt").first.wait_for()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "console-event-phone.png"), full_page=True)

    assert page.evaluate(OVERFLOWING_TABLES) == []
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE_WIDTH  # no sideways page scroll
    # The columns that do not fit are reached by scrolling the table itself, inside its card.
    card = page.locator(f"[id='{delivery.id}']").bounding_box()
    last_column = timeline.locator("tr.attempt").first.locator("td").last
    last_column.scroll_into_view_if_needed()
    cell = last_column.bounding_box()
    assert timeline.evaluate("table => table.scrollLeft") > 0
    assert card is not None and cell is not None
    assert card["x"] <= cell["x"] and cell["x"] + cell["width"] <= card["x"] + card["width"] + 0.5
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE_WIDTH
