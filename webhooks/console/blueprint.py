"""The ``console`` blueprint under /console: templates, static files, HTML error pages, template helpers."""

from __future__ import annotations

import logging
from typing import Any

from flask import Blueprint, abort, g, render_template, request, url_for
from markupsafe import Markup
from werkzeug.exceptions import HTTPException, InternalServerError

from webhooks.console import formatting
from webhooks.storage.timeutil import isoformat, utcnow

log = logging.getLogger(__name__)

bp = Blueprint(
    "console",
    __name__,
    url_prefix="/console",
    template_folder="templates",
    static_folder="static",
    static_url_path="/static",
)


def when(value: Any) -> Markup:
    """``<time>`` showing a relative time, the exact UTC time in its tooltip (empty for None)."""
    if value is None:
        return Markup('<span class="muted">—</span>')
    return Markup('<time datetime="{}" title="{}">{}</time>').format(
        isoformat(value), formatting.utc_text(value), formatting.relative(value, g.get("now") or utcnow())
    )


def url_with(**changes: Any) -> str:
    """This page's URL with some query parameters changed (None or "" removes one): pagers, filters."""
    args = {**request.args.to_dict(), **changes}
    return url_for(str(request.endpoint), **(request.view_args or {}), **{k: v for k, v in args.items() if v})


@bp.context_processor
def helpers() -> dict[str, Any]:
    return {
        "when": when,
        "url_with": url_with,
        "utc": formatting.utc_text,
        "duration": formatting.duration_text,
        "pretty_json": formatting.pretty_json,
        "cause": formatting.cause_label,
    }


@bp.before_request
def stamp_now() -> None:
    g.now = utcnow()


@bp.errorhandler(HTTPException)
def http_error(error: HTTPException) -> tuple[str, int]:
    """Every error inside /console is a page, never JSON or a traceback."""
    return render_template("console/error.html", error=error), error.code or 500


@bp.errorhandler(Exception)
def unexpected_error(error: Exception) -> tuple[str, int]:
    log.error("console error", exc_info=error)
    return http_error(InternalServerError("Something went wrong; it has been logged."))


@bp.route("/<path:unknown>")
def not_found(unknown: str) -> None:
    """Unknown console paths get the console's 404 page (not the API's JSON)."""
    abort(404, f"There is no console page at /console/{unknown}.")
