"""The API documentation page ``/docs`` in a real headless Chromium that can reach nothing but the service.

The page must not depend on the internet: its scripts and styles come from the service itself.
"""

from __future__ import annotations

from playwright.sync_api import Browser, Route, expect

from tests.browser import ARTIFACTS, WATCH_CSP


def test_docs_page_renders_the_operations_with_no_host_but_the_service_reachable_and_no_inline_script(
    browser: Browser, base_url: str  # noqa: F811 (fixtures)
) -> None:
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    blocked: list[str] = []

    def only_the_service(route: Route) -> None:
        if route.request.url.startswith(base_url + "/"):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort("internetdisconnected")

    context.route("**/*", only_the_service)
    page = context.new_page()
    page.add_init_script(WATCH_CSP)
    response = page.goto(f"{base_url}/docs")

    expect(page.get_by_text("/v1/events", exact=True).first).to_be_visible(timeout=15_000)
    expect(page.get_by_text("/v1/endpoints/{endpoint_id}/recover", exact=True).first).to_be_visible()
    assert page.locator(".opblock").count() >= 10  # one block per operation of the OpenAPI document
    assert blocked == []
    assert page.evaluate("window.cspViolations") == []
    assert response is not None and "script-src 'self';" in response.headers["content-security-policy"]
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "api-docs.png"))
    context.close()


def test_docs_assets_are_served_by_the_service_with_their_licence(client) -> None:
    page = client.get("/docs").get_data(as_text=True)

    assert "http://" not in page and "https://" not in page  # nothing loaded from elsewhere
    for asset in ("swagger-ui.css", "swagger-ui-bundle.js", "swagger-ui-standalone-preset.js", "LICENSE"):
        response = client.get(f"/docs/assets/{asset}")
        assert response.status_code == 200, asset
        assert response.content_length and response.content_length > 100, asset
    assert client.get("/docs/assets/VERSION").get_data(as_text=True).startswith("v5.")
    assert client.get("/docs/assets/../app.py").status_code == 404
