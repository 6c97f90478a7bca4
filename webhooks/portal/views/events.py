"""The event log of the portal: the tenant's events, newest first."""

from __future__ import annotations

from flask import render_template

from webhooks.portal.auth import visitor
from webhooks.portal.blueprint import bp
from webhooks.storage.models import Event


@bp.get("/events")
def events() -> str:
    rows = list(Event.select().where(Event.tenant == visitor().tenant.id).order_by(Event.id.desc()).limit(50))
    return render_template("portal/events.html", events=rows)
