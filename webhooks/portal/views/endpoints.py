"""Endpoint pages of the portal: the list with each endpoint's health."""

from __future__ import annotations

from flask import render_template

from webhooks.portal.auth import visitor
from webhooks.portal.blueprint import bp
from webhooks.storage.models import Endpoint


@bp.get("/")
def endpoints() -> str:
    """The tenant's endpoints, newest first, each with its health."""
    rows = list(Endpoint.select().where((Endpoint.tenant == visitor().tenant.id) & Endpoint.deleted_at.is_null())
                .order_by(Endpoint.id.desc()))
    return render_template("portal/endpoints.html", endpoints=rows)
