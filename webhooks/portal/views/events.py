"""The portal's event log (the tenant's events, newest first, filtered by event type, delivery
status, endpoint and time), an event's page (payload and every attempt), and resending one
delivery. The console's filter and paging are reused, with the tenant fixed to the session's."""

from __future__ import annotations

from flask import g, render_template, request, url_for
from werkzeug.wrappers import Response

from webhooks import actions
from webhooks.console.queries import STATUSES, UNDELIVERED, event_timelines, page, row_id_cursor
from webhooks.console.views.common import perform, read_filter
from webhooks.portal.auth import owned_or_404, requires, visitor
from webhooks.portal.blueprint import bp
from webhooks.portal.capabilities import RESEND
from webhooks.portal.forms import types_sent
from webhooks.portal.queries import delivery_counts, events_matching
from webhooks.storage.models import Delivery, Endpoint, Event
from webhooks.storage.timeutil import seconds

#: How much of a response body an attempt shows.
BODY_PREVIEW = 1000

#: Attempts shown per delivery on an event's page.
MAX_ATTEMPTS = 100

#: An event's page reloads itself while one of its deliveries waits for its first answer and the
#: event is younger than this (a test event's attempt shows when it lands, with no script).
REFRESH_WHILE_YOUNGER_THAN = seconds(120)


@bp.get("/events")
def events() -> str:
    """The tenant's events, newest first, as the filter narrows them, each with how it was delivered."""
    args = {key: value for key, value in request.args.items() if key not in ("tenant", "q")}
    narrowed, errors = read_filter(args, g.now, tenant_ids=(visitor().tenant.id,))
    query = events_matching(visitor().tenant.id, narrowed)
    results = page(query, Event.seq, row_id_cursor(request.args.get("before")) if not errors else None)
    endpoints = list(Endpoint.select(Endpoint.id, Endpoint.url).where(Endpoint.tenant == visitor().tenant.id)
                     .order_by(Endpoint.id.desc()))
    return render_template(
        "portal/events.html", results=results, errors=errors, statuses=STATUSES, endpoints=endpoints,
        types=[name for name, _ in types_sent(visitor().tenant.id)],
        delivered=delivery_counts([event.id for event in results.rows]),
    )


@bp.get("/events/<event_id>")
def event(event_id: str) -> str:
    row = owned_or_404(Event, event_id, "event")
    deliveries, timelines, left_out = event_timelines(row.id, MAX_ATTEMPTS)
    waiting = any(d.status in UNDELIVERED and not timelines.get(d.id) for d in deliveries)
    return render_template(
        "portal/event.html", event=row, deliveries=deliveries, timelines=timelines, body_preview=BODY_PREVIEW,
        attempts_left_out=left_out,
        refresh=waiting and g.now - row.created_at < REFRESH_WHILE_YOUNGER_THAN,
    )


@bp.post("/deliveries/<delivery_id>/resend")
@requires(RESEND)
def delivery_resend(delivery_id: str) -> Response:
    """A fresh attempt of one delivery now, outside the retry schedule."""
    row = owned_or_404(Delivery, delivery_id, "delivery")
    return perform(
        "resend", "delivery", row.id,
        lambda: actions.resend(row, requester=visitor().requester),
        lambda _: "Sent again: the new attempt shows below as soon as the endpoint has answered.",
        url_for("portal.event", event_id=row.event_id, _anchor=row.id), event_id=row.event_id,
        actor=visitor().actor, status_before=row.status,
    )
