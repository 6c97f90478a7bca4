"""The event-type catalog page: every type under its group, with its description, its payload's
fields, its JSON Schema and examples (the portal shows the same, through the kit's ``pages.catalog``
and ``pages/catalog.html``)."""

from __future__ import annotations

from flask import render_template, request

from webhooks.console.blueprint import bp
from webhooks.pages.catalog import listing


@bp.route("/event-types")
def event_types() -> str:
    return render_template("console/event_types.html", **listing(request.args))
