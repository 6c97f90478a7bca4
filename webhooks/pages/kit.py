"""Putting a blueprint on the kit: its hooks, its helpers in templates, its error pages, and
the kit's own blueprint (layout, macros, stylesheet, each site's brand colours).

A page blueprint calls ``attach(bp)`` where it is made (hooks must be in place before the
blueprint is first registered) and ``register(app, bp, site)`` in its ``init_app``.
"""

from __future__ import annotations

import logging
from typing import Any

from flask import Blueprint, Flask, Response, abort, current_app, g, has_request_context, render_template, request
from flask.sessions import SecureCookieSessionInterface
from werkzeug.exceptions import HTTPException, InternalServerError

from webhooks.catalog import reading
from webhooks.pages import csrf, errors, sessions, text
from webhooks.pages.headers import page_headers
from webhooks.pages.site import Site
from webhooks.secrecy import mask
from webhooks.storage.timeutil import utcnow

log = logging.getLogger(__name__)

#: Seconds browsers may keep the kit's stylesheets (they change with a release or a restart).
STYLE_MAX_AGE = 3600

kit = Blueprint("pages", __name__, url_prefix="/pages", template_folder="templates", static_folder="static",
                static_url_path="/static")


class SessionCookies(SecureCookieSessionInterface):
    """Flask's signed cookie (flash messages, the login form's CSRF token) with the attributes of
    the kit's own session cookie on the site that sets it: ``Secure`` on HTTPS, and on a site shown
    in other sites' frames (the portal) ``SameSite=None; Secure; Partitioned``, or its messages
    would never reach the frame."""

    def _site(self) -> Site | None:
        return sites().get(str(request.blueprint)) if has_request_context() else None

    def get_cookie_samesite(self, app: Flask) -> str | None:
        site = self._site()
        return site.cookie_samesite if site is not None else super().get_cookie_samesite(app)

    def get_cookie_secure(self, app: Flask) -> bool:
        return sessions.secure_cookies() or self.get_cookie_samesite(app) == "None"

    def get_cookie_partitioned(self, app: Flask) -> bool:
        return self.get_cookie_samesite(app) == "None"


def sites() -> dict[str, Site]:
    return current_app.extensions.setdefault("webhooks.pages", {})


def current_site() -> Site:
    """The site of the blueprint serving this request."""
    return sites()[str(request.blueprint)]


@kit.get("/brand/<site_name>.css")
def brand_css(site_name: str) -> Response:
    """A site's accent colour as CSS custom properties (a file, so no page needs an inline style)."""
    site = sites().get(site_name)
    if site is None:
        abort(404)
    response = Response(site.branding.stylesheet(), mimetype="text/css")
    response.cache_control.max_age = STYLE_MAX_AGE
    return response


def _before() -> None:
    g.now = utcnow()
    errors.refuse_nul()
    csrf.check(current_site())


def _after(response: Response) -> Response:
    site = current_site()
    for name, value in page_headers(site).items():
        response.headers.setdefault(name, value)
    sessions.write_cookie(site, response, current_app.blueprints[site.name].url_prefix or "/")
    return response


def _helpers() -> dict[str, Any]:
    site = current_site()
    return {
        "site": site,
        "branding": site.branding,
        "csrf_token": lambda: csrf.csrf_token(site),
        "csrf_field": lambda: csrf.csrf_field(site),
        "when": text.when,
        "url_with": text.url_with,
        "utc": text.utc_text,
        "duration": text.duration_text,
        "pretty_json": text.pretty_json,
        "masked": mask,  # a URL as people may see it: a destination's password never shows
        "catalog_fields": reading.field_rows,
    }


def _http_error(error: HTTPException) -> tuple[str, int]:
    """Every error inside a site is one of its pages, never JSON or a traceback."""
    site = current_site()
    page = render_template([f"{site.name}/error.html", "pages/error.html"], error=error,
                           title=errors.title_of(error.code, error.name))
    return page, error.code or 500


def _unexpected_error(error: Exception) -> tuple[str, int]:
    log.error("error on %s %s", request.method, request.path, exc_info=error)
    return _http_error(InternalServerError("Something went wrong on our side; it has been logged."))


def _not_found(unknown: str) -> None:
    """Unknown paths inside a site get its 404 page (not the API's JSON)."""
    abort(404, f"There is no page at {request.path}.")


def attach(bp: Blueprint) -> None:
    """Give ``bp`` the kit's hooks: NUL refused, CSRF checked, security headers, session cookie,
    template helpers and error pages."""
    bp.before_request(_before)
    bp.after_request(_after)
    bp.context_processor(_helpers)
    bp.register_error_handler(HTTPException, _http_error)
    bp.register_error_handler(Exception, _unexpected_error)
    bp.add_url_rule("/<path:unknown>", "not_found", _not_found)


def site_blueprint(name: str, import_name: str) -> Blueprint:
    """A site's blueprint at ``/<name>``, with its own templates and static files and the kit's hooks."""
    bp = Blueprint(name, import_name, url_prefix=f"/{name}", template_folder="templates",
                   static_folder="static", static_url_path="/static")
    attach(bp)
    return bp


def register(app: Flask, bp: Blueprint, site: Site) -> None:
    """Serve ``bp`` on ``app`` as ``site`` (the kit's own blueprint comes along once)."""
    if kit.name not in app.blueprints:
        app.register_blueprint(kit)
        app.session_interface = SessionCookies()
    app.extensions.setdefault("webhooks.pages", {})[site.name] = site
    app.register_blueprint(bp)
