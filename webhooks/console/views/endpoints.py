"""Endpoint pages: health and its history, 24-hour charts, failures by cause; recover, try now, disable, enable."""

from __future__ import annotations

from datetime import timedelta

from flask import current_app, g, render_template, request, url_for
from werkzeug.wrappers import Response

from webhooks import actions
from webhooks.health import probes
from webhooks.storage import endpoint_windows
from webhooks.console import audit, charts, stats
from webhooks.console.auth import current_staff, operator_required
from webhooks.console.blueprint import bp
from webhooks.console.formatting import parse_when
from webhooks.console.queries import page
from webhooks.console.views.common import get_or_404, perform, staff_requester
from webhooks.storage.models import Delivery, Endpoint, HealthChange, Tenant
from webhooks.storage.timeutil import isoformat

#: The list's state filter: name -> condition.
STATES = {
    "offline": Endpoint.health == "offline",
    "recovering": Endpoint.health == "recovering",
    "disabled": Endpoint.disabled == True,
    "deleted": Endpoint.deleted_at.is_null(False),
}


@bp.route("/endpoints")
def endpoints() -> str:
    """Endpoints, newest first; ``state`` narrows to offline, recovering, disabled or deleted ones."""
    state, text = request.args.get("state", ""), request.args.get("q", "").strip()
    query = Endpoint.select(Endpoint, Tenant).join(Tenant)
    query = query.where(STATES[state]) if state in STATES else query.where(Endpoint.deleted_at.is_null())
    if text:
        query = query.where(Endpoint.url.contains(text) | Tenant.name.contains(text) | (Endpoint.id == text))
    return render_template(
        "console/endpoints.html", results=page(query, Endpoint.id, request.args.get("before")),
        states=STATES, state=state, text=text,
    )


@bp.route("/endpoints/<endpoint_id>")
def endpoint(endpoint_id: str) -> str:
    row = get_or_404(Endpoint, endpoint_id, "endpoint")
    hours = stats.endpoint_hourly(row.id, g.now)
    attempts = sum(hour.total for hour in hours)
    return render_template(
        "console/endpoint.html",
        endpoint=row,
        tenant=Tenant.get_by_id(row.tenant_id),
        success_chart=charts.success_chart(hours),
        latency_chart=charts.latency_chart(hours),
        attempts_24h=attempts,
        success_24h=sum(hour.succeeded for hour in hours) / attempts if attempts else None,
        causes=stats.failure_causes(row.id, g.now - timedelta(hours=24)),
        counts=stats.status_counts(Delivery.endpoint == row.id),
        concurrency=endpoint_windows.of_endpoints([row.id]).get(row.id),
        changes=list(HealthChange.select().where(HealthChange.endpoint == row.id).order_by(HealthChange.id.desc()).limit(20)),
        history=audit.about("endpoint", row.id),
        recover_default=isoformat(g.now - timedelta(hours=24)),
        next_probe_at=probes.due_at(row, current_app.extensions["webhooks.settings"].probe_interval),
    )


@bp.route("/endpoints/<endpoint_id>/recover", methods=["POST"])
@operator_required
def endpoint_recover(endpoint_id: str) -> Response:
    """Resend every failed delivery of the endpoint created since the given time; parked ones stay parked."""
    row = get_or_404(Endpoint, endpoint_id, "endpoint")
    text = request.form.get("since", "")
    return perform(
        "recover", "endpoint", row.id,
        lambda: actions.recover(row, parse_when(text, g.now), requester=staff_requester()),
        lambda result: (f"Recover of {row.id} since {text}: {result.queued} failed queued for a fresh attempt now; "
                        f"{result.parked} parked stay parked (released in order, with their remaining attempts, "
                        "when the endpoint is reachable)."),
        url_for("console.endpoint", endpoint_id=row.id),
        since=text,
    )


@bp.route("/endpoints/<endpoint_id>/probe", methods=["POST"])
@operator_required
def endpoint_probe(endpoint_id: str) -> Response:
    """Try now: probe an offline endpoint at once; if it answers, what it missed is released in order."""
    row = get_or_404(Endpoint, endpoint_id, "endpoint")
    interval = current_app.extensions["webhooks.settings"].probe_interval
    return perform(
        "probe", "endpoint", row.id,
        lambda: actions.probe_now(row, interval, requester=staff_requester()),
        lambda message: (f"Probe of {row.id} queued with its oldest undelivered delivery {message.delivery_id}: "
                         "if the endpoint answers, it is back and what it missed follows in order."),
        url_for("console.endpoint", endpoint_id=row.id),
    )


@bp.route("/endpoints/<endpoint_id>/<any(disable, enable):action>", methods=["POST"])
@operator_required
def endpoint_toggle(endpoint_id: str, action: str) -> Response:
    """Disable (no calls; new deliveries park) or enable (parked deliveries are released)."""
    row = get_or_404(Endpoint, endpoint_id, "endpoint")
    disabling = action == "disable"
    reason = request.form.get("reason", "").strip() or f"disabled in the console by {current_staff().email}"
    return perform(
        action, "endpoint", row.id,
        lambda: actions.set_endpoint_disabled(row, disabling, reason if disabling else None),
        lambda _: f"Endpoint {row.id} {'disabled' if disabling else 'enabled'}.",
        url_for("console.endpoint", endpoint_id=row.id),
        **({"reason": reason} if disabling else {}),
    )
