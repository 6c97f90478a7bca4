"""Endpoint pages of the portal: the list with each endpoint's health, an endpoint's page (health,
the types it receives with their examples, its filter, recent attempts, how to verify), and the
form that registers or edits one (types picked from the catalog, the filter as JSON)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from flask import current_app, flash, g, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from webhooks import actions
from webhooks.secrecy import mask
from webhooks.health import summary
from webhooks.health.presence import health_of
from webhooks.portal import forms
from webhooks.portal.auth import owned_or_404, record, requires, visitor
from webhooks.portal.blueprint import bp
from webhooks.portal.capabilities import MANAGE_ENDPOINTS
from webhooks.portal.snippets import guides_for
from webhooks.portal.tryouts import filter_text, received_types
from webhooks.storage.models import Attempt, Endpoint
from webhooks.storage.timeutil import isoformat

#: Attempts shown on an endpoint's page, newest first.
RECENT_ATTEMPTS = 20


def live_endpoint(endpoint_id: str) -> Endpoint:
    """The tenant's endpoint (not deleted), or 404."""
    return owned_or_404(Endpoint, endpoint_id, "endpoint", Endpoint.deleted_at.is_null())


def health_rows(endpoints: list[Endpoint]) -> list[dict[str, Any]]:
    """Each endpoint with its health, 24-hour answers, concurrency, what is parked and when it will have caught up."""
    settings = current_app.extensions["webhooks.settings"]
    summary.with_parked_stats(endpoints, settings)
    answers = summary.answer_stats([e.id for e in endpoints], g.now - timedelta(hours=24))
    rows = []
    for endpoint in endpoints:
        stats = answers.get(endpoint.id, summary.AnswerStats())
        catch_up = summary.catch_up(endpoint.parked_count, settings.release_rate, stats.p50_ms)
        health = health_of(endpoint)
        rows.append({
            "endpoint": endpoint, "health": health, "stats": stats, "catch_up": catch_up,
            "caught_up_at": g.now + catch_up if catch_up and health == "recovering" else None,
        })
    return rows


def _check_destinations(values: dict[str, Any], endpoint: Endpoint | None, errors: Any) -> None:
    """``actions.check_destinations`` on the form's URLs, its problems as the form words them."""
    for name, problem in actions.check_destinations(values, endpoint, current_app.extensions["webhooks.settings"]).items():
        errors[name] = f"{forms.LABELS[name]}: {problem}"


@bp.get("/")
def endpoints() -> str:
    """The tenant's endpoints, newest first, each with its health."""
    rows = list(Endpoint.select().where((Endpoint.tenant == visitor().tenant.id) & Endpoint.deleted_at.is_null())
                .order_by(Endpoint.id.desc()))
    return render_template("portal/endpoints.html", rows=health_rows(rows))


@bp.get("/endpoints/<endpoint_id>")
def endpoint(endpoint_id: str) -> str:
    row = live_endpoint(endpoint_id)
    attempts = list(Attempt.select().where(Attempt.endpoint == row.id).order_by(Attempt.id.desc()).limit(RECENT_ATTEMPTS))
    return render_template("portal/endpoint.html", row=health_rows([row])[0], endpoint=row, attempts=attempts,
                           guides=guides_for(row.url, row.fallback_url), recover_default=isoformat(g.now - timedelta(hours=24)),
                           received=received_types(row, forms.catalog_entries()))


def _form_page(endpoint: Endpoint | None, values: dict[str, Any], errors: Any, status: int = 200) -> tuple[str, int]:
    """The form with ``values``; the filter as typed when it was posted, else the endpoint's as JSON."""
    typed = request.form.get("filter") if request.method == "POST" else None
    return render_template("portal/endpoint_form.html", endpoint=endpoint, values=values, errors=errors,
                           fields=forms.FIELDS, choices=forms.type_choices(visitor().tenant.id),
                           filter_text=typed if typed is not None else filter_text(values.get("filter"))), status


@bp.route("/endpoints/new", methods=["GET", "POST"])
@requires(MANAGE_ENDPOINTS)
def endpoint_new() -> Response | tuple[str, int]:
    """Register an endpoint: the API's validation, its SSRF rules and its endpoint limit."""
    if request.method == "GET":
        return _form_page(None, {"event_types": []}, {})
    values, errors = forms.read_endpoint(request.form)
    settings = current_app.extensions["webhooks.settings"]
    if not errors:
        _check_destinations(values, None, errors)
    if errors:
        return _form_page(None, values, errors, 400)
    try:
        endpoint = actions.create_endpoint(visitor().tenant.id, values, scheme="v1",
                                           max_endpoints=settings.max_endpoints_per_tenant)
    except actions.EndpointLimitReached as error:
        errors["url"] = f"No endpoint was added: {error}."
        return _form_page(None, values, errors, 409)
    record("create", "endpoint", endpoint.id, url=mask(endpoint.url))
    flash(f"Endpoint {mask(endpoint.url)} added. Its signing secret is on this page.", "success")
    return redirect(url_for("portal.endpoint", endpoint_id=endpoint.id), 303)


@bp.route("/endpoints/<endpoint_id>/edit", methods=["GET", "POST"])
@requires(MANAGE_ENDPOINTS)
def endpoint_edit(endpoint_id: str) -> Response | tuple[str, int]:
    endpoint = live_endpoint(endpoint_id)
    if request.method == "GET":
        values = {name: getattr(endpoint, name) for name in forms.FIELDS}
        for name in actions.URL_FIELDS:  # a destination's password is never shown again
            values[name] = mask(values[name]) if values[name] else values[name]
        return _form_page(endpoint, values, {})
    values, errors = forms.read_endpoint(request.form)
    if not errors:
        _check_destinations(values, endpoint, errors)  # left as shown: unchanged, password and all
    if errors:
        return _form_page(endpoint, values, errors, 400)
    changed = {name: value for name, value in values.items() if getattr(endpoint, name) != value}
    actions.update_endpoint(endpoint, changed)
    record("update", "endpoint", endpoint.id, changed=sorted(changed))
    flash("Endpoint saved." if changed else "Nothing was changed.", "success")
    return redirect(url_for("portal.endpoint", endpoint_id=endpoint.id), 303)
