"""The page kit serves a second site (as the portal will) beside the console: its own branding,
framing and session cookie, the same macros, CSRF, security headers and error pages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from flask import Blueprint, Flask, render_template, request
from flask.testing import FlaskClient

from tests.console_helpers import PASSWORD, form_csrf, log_in_with_form, staff
from webhooks import pages
from webhooks.pages import sessions
from webhooks.pages.errors import FieldErrors
from webhooks.pages.site import Branding, contrast, frame_ancestors, ink_on, readable_on_white

#: A portal-like site: another product name, a logo on a CDN, a light accent, framed by one origin.
DEMO = pages.Site(
    name="demo",
    branding=Branding("Acme Hooks", logo_url="https://cdn.example.com/acme.png", accent="#ffcc00"),
    home="demo.home",
    layout="demo/base.html",
    frame_ancestors=frame_ancestors("https://app.example.com https://*.example.org"),
)

demo = Blueprint("demo", __name__, url_prefix="/demo", template_folder=str(Path(__file__).parent / "templates"))
pages.attach(demo)


@demo.route("/", methods=["GET", "POST"])
def home() -> tuple[str, int]:
    errors = FieldErrors()
    if request.method == "POST":
        if not request.form.get("name", "").strip():
            errors["name"] = "Enter your name"
        if request.form.get("colour") not in ("r", "g"):
            errors["colour"] = "Choose a colour"
    return render_template("demo/form.html", errors=errors), 400 if errors else 200


@demo.route("/sign-in", methods=["POST"])
def sign_in() -> str:
    sessions.start(DEMO, "ten_1", {"capabilities": ["view"]})
    return "signed in"


@demo.route("/whoami")
def whoami() -> str:
    row = sessions.current(DEMO)
    return row.subject if row else "nobody"


@demo.route("/delete", methods=["GET", "POST"])
def delete() -> str:
    if request.method == "POST":
        return "deleted"
    return render_template("pages/confirm.html", question="Delete endpoint ep_1?", consequence="Its deliveries stop.",
                           action="/demo/delete", confirm="Delete endpoint ep_1", cancel="/demo/")


@pytest.fixture
def app(app: Flask) -> Flask:
    pages.register(app, demo, DEMO)
    return app


def test_each_site_has_its_own_branding(client: FlaskClient) -> None:
    page = client.get("/demo/").get_data(as_text=True)
    brand = client.get("/pages/brand/demo.css").get_data(as_text=True)
    console = client.get("/console/login").get_data(as_text=True)

    assert "<title>Form · Acme Hooks</title>" in page and 'src="https://cdn.example.com/acme.png" alt=""' in page
    assert 'href="/pages/brand/demo.css"' in page and "--accent: #ffcc00;" in brand
    assert "Webhooks support" in console and "Acme Hooks" not in console and "<img" not in console


def test_a_light_accent_is_darkened_for_links_and_buttons_get_a_readable_label() -> None:
    assert contrast(readable_on_white("#ffcc00"), "#ffffff") >= 4.5
    assert readable_on_white("#2b5fb3") == "#2b5fb3"  # dark enough already: unchanged
    assert ink_on("#ffcc00") == "#1a202c" and ink_on("#2b5fb3") == "#ffffff"


@pytest.mark.parametrize("bad", [{"accent": "red"}, {"accent": "#12345"}, {"accent": "#fff;}body{x:1"},
                                 {"logo_url": "http://cdn.example.com/a.png"}, {"logo_url": "//evil.example/a.png"},
                                 {"logo_url": "javascript:alert(1)"}, {"product_name": " "}])
def test_branding_refuses_what_could_break_the_page_or_its_policy(bad: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        Branding(**{"product_name": "Acme", **bad})


def test_frame_ancestors_are_origins() -> None:
    assert frame_ancestors(None) == () and frame_ancestors("  ") == ()
    with pytest.raises(ValueError, match="origin"):
        frame_ancestors("https://app.example.com 'unsafe-inline'")


def test_each_site_says_who_may_frame_it_and_loads_nothing_inline(client: FlaskClient) -> None:
    framed = client.get("/demo/").headers
    console = client.get("/console/login").headers

    assert "frame-ancestors https://app.example.com https://*.example.org" in framed["Content-Security-Policy"]
    assert "X-Frame-Options" not in framed  # it could only say DENY or SAMEORIGIN
    assert "img-src 'self' data: https://cdn.example.com;" in framed["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in console["Content-Security-Policy"] and console["X-Frame-Options"] == "DENY"
    for headers in (framed, console):
        policy = headers["Content-Security-Policy"]
        assert "script-src 'self';" in policy and "style-src 'self';" in policy and "unsafe-inline" not in policy
        assert headers["X-Content-Type-Options"] == "nosniff" and headers["Referrer-Policy"] == "same-origin"


def test_fields_have_one_label_and_errors_link_to_them(client: FlaskClient) -> None:
    token = form_csrf(client.get("/demo/").get_data(as_text=True))

    response = client.post("/demo/", data={"csrf_token": token, "name": " "})

    page = response.get_data(as_text=True)
    assert response.status_code == 400
    summary = page.split('class="error-summary"')[1].split("</div>")[0]
    assert re.findall(r'href="#(field-[a-z]+)">([^<]+)<', summary) == [("field-name", "Enter your name"),
                                                                      ("field-colour", "Choose a colour")]
    assert page.count('<label for="field-name">Your name</label>') == 1 and 'id="field-name"' in page
    assert re.search(r'id="field-name"[^>]*aria-describedby="hint-name error-name"[^>]*aria-invalid="true"', page, re.S)
    assert '<option value="">choose</option>' in page and "<caption>Endpoints</caption>" in page
    assert '<th scope="col" class="num">Attempts</th>' in page and '<span class="badge failed">failed</span>' in page
    assert ">Delete endpoint ep_1</button>" in page and "<script" not in page and "style=" not in page


def test_a_destructive_action_is_confirmed_on_a_page_of_its_own(client: FlaskClient) -> None:
    page = client.get("/demo/delete").get_data(as_text=True)

    assert "<h1>Delete endpoint ep_1?</h1>" in page and "Its deliveries stop." in page
    assert '<button type="submit" class="danger">Delete endpoint ep_1</button>' in page and 'href="/demo/">Cancel' in page
    assert client.post("/demo/delete").status_code == 400  # no CSRF token: nothing deleted
    assert client.post("/demo/delete", data={"csrf_token": form_csrf(page)}).get_data(as_text=True) == "deleted"


def test_sessions_of_one_site_never_open_another(client: FlaskClient) -> None:
    token = form_csrf(client.get("/demo/").get_data(as_text=True))
    started = client.post("/demo/sign-in", data={"csrf_token": token})
    cookie = next(value for value in started.headers.getlist("Set-Cookie") if value.startswith("demo_session="))

    assert "Path=/demo" in cookie and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert client.get("/demo/whoami").get_data(as_text=True) == "ten_1"
    stolen = client.get_cookie("demo_session", path="/demo")
    client.set_cookie("console_session", stolen.value, path="/console")  # the demo's token as the console's
    assert client.get("/console/").status_code == 302


def test_errors_are_pages_of_the_site_in_words(client: FlaskClient) -> None:
    missing = client.get("/demo/no/such/page")
    not_allowed = client.post("/demo/", data={})

    assert missing.status_code == 404 and "<h1>Page not found</h1>" in missing.get_data(as_text=True)
    assert "Acme Hooks" in missing.get_data(as_text=True)
    assert not_allowed.status_code == 400 and "Reload the page and try again" in not_allowed.get_data(as_text=True)


def test_a_nul_is_a_400_naming_the_field_or_a_404_in_a_path(client: FlaskClient) -> None:
    from tests.console_helpers import log_in

    log_in(client, "viewer")

    in_query = client.get("/console/search?q=evt%00")
    in_path = client.get("/console/events/evt_%00x")

    assert in_query.status_code == 400 and "“q” holds a NUL character" in in_query.get_data(as_text=True)
    assert in_path.status_code == 404 and "Traceback" not in in_path.get_data(as_text=True)


def test_a_next_with_cr_or_lf_goes_to_the_overview_instead(client: FlaskClient) -> None:
    user = staff("viewer")

    response = log_in_with_form(client, user.email, PASSWORD, next_path="/console/\r\nSet-Cookie: x=1")
    again = client.get("/console/login?next=/console/%0d%0aSet-Cookie:%20x=1")

    assert response.status_code == 303 and response.headers["Location"] == "/console/"
    assert again.status_code == 302 and again.headers["Location"] == "/console/"


def test_a_site_shown_in_other_sites_frames_gets_a_cookie_browsers_send_there(app: Flask, client: FlaskClient) -> None:
    from dataclasses import replace

    app.extensions["webhooks.pages"]["demo"] = replace(DEMO, cookie_samesite="None")
    token = form_csrf(client.get("/demo/").get_data(as_text=True))

    started = client.post("/demo/sign-in", data={"csrf_token": token})

    cookie = next(value for value in started.headers.getlist("Set-Cookie") if value.startswith("demo_session="))
    assert "SameSite=None" in cookie and "; Secure" in cookie and "Partitioned" in cookie  # even over plain HTTP
