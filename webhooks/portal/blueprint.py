"""The ``portal`` blueprint under /portal, on the page kit (``webhooks.pages``)."""

from __future__ import annotations

from flask import Blueprint

from webhooks import pages

bp = Blueprint(
    "portal",
    __name__,
    url_prefix="/portal",
    template_folder="templates",
    static_folder="static",
    static_url_path="/static",
)
pages.attach(bp)
