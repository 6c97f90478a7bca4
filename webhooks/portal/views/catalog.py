"""The catalog of event types, as the customer reads it: each type under its group, with its
description, its payload's fields, its JSON Schema and examples (the console's page, through the
kit's ``pages.catalog`` and ``pages/catalog.html``; archived types are left out)."""

from __future__ import annotations

from flask import render_template, request

from webhooks.pages.catalog import listing
from webhooks.portal.blueprint import bp


@bp.get("/event-types")
def event_types() -> str:
    return render_template("portal/event_types.html", **listing(request.args, archived_choice=False))
