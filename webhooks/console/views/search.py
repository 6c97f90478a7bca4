"""The search box: an id goes straight to its page; anything else lists the matching deliveries."""

from __future__ import annotations

from flask import g, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from webhooks.console.blueprint import bp
from webhooks.console.queries import (
    STATUSES,
    exact_target,
    matching_endpoints,
    matching_tenants,
    page,
)
from webhooks.console.views.common import get_or_404, read_filter
from webhooks.storage.ids import has_prefix
from webhooks.storage.models import Delivery


@bp.route("/search")
def search() -> Response | tuple[str, int]:
    """``q`` is an event, delivery or endpoint id, part of a URL, or a tenant name; plus filters."""
    text = request.args.get("q", "").strip()
    target = exact_target(text) if text else None
    if target is not None:
        kind, object_id = target
        return redirect(url_for(f"console.{kind}", **{f"{kind}_id": object_id}))
    filters, errors = read_filter(request.args, g.now)
    results = page(filters.query(), Delivery.id, request.args.get("before")) if not errors else None
    return render_template(
        "console/search.html",
        filters=filters,
        errors=errors,
        results=results,
        statuses=STATUSES,
        endpoints=matching_endpoints(text) if text else [],
        tenants=matching_tenants(text) if text else [],
        missing_id=text if any(has_prefix(text, prefix) for prefix in ("evt", "dlv", "ep")) else None,
    ), 400 if errors else 200


@bp.route("/deliveries/<delivery_id>")
def delivery(delivery_id: str) -> Response:
    """A delivery is shown on its event's page, at its own timeline."""
    row = get_or_404(Delivery, delivery_id, "delivery")
    return redirect(url_for("console.event", event_id=row.event_id, _anchor=row.id))
