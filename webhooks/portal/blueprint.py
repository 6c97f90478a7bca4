"""The ``portal`` blueprint under /portal, on the page kit (``webhooks.pages``), and its template helpers."""

from __future__ import annotations

from typing import Any

from flask import Blueprint

from webhooks import pages
from webhooks.console import formatting

bp = Blueprint(
    "portal",
    __name__,
    url_prefix="/portal",
    template_folder="templates",
    static_folder="static",
    static_url_path="/static",
)
pages.attach(bp)


@bp.context_processor
def helpers() -> dict[str, Any]:
    return {"cause": formatting.cause_label}
