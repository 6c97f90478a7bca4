"""The event page: payload and, per endpoint, the timeline of every attempt; resend and replay."""

from __future__ import annotations

from itertools import accumulate

from flask import current_app, render_template, url_for
from werkzeug.wrappers import Response

from webhooks import actions
from webhooks.console.auth import operator_required
from webhooks.console.blueprint import bp
from webhooks.console.formatting import next_attempt_holds, requester_label, tier_label
from webhooks.console.queries import event_timelines
from webhooks.console.views.common import back, get_or_404, perform, staff_requester
from webhooks.storage.models import ApiKey, Delivery, Event, ManualAttempt, Tenant

#: How much of a stored response body the timeline shows (the rest is counted).
BODY_PREVIEW = 2000

#: Attempts shown per delivery (resends can make the list long).
MAX_ATTEMPTS = 200

#: Resends and recovers listed on the event page (newest first).
MAX_REQUESTS = 100

#: The trigger each delivery action gives the new attempt.
TRIGGERS = {"resend": "resend", "replay": "recover"}


@bp.route("/events/<event_id>")
def event(event_id: str) -> str:
    row = get_or_404(Event, event_id, "event")
    deliveries, timelines, left_out = event_timelines(row.id, MAX_ATTEMPTS)
    ladder_nos = {attempt.id: number for timeline in timelines.values()
                  for attempt, number in zip(timeline, accumulate(a.trigger == "ladder" for a in timeline))}
    ladder = current_app.extensions["webhooks.settings"].ladder
    requests = list(
        ManualAttempt.select().where(ManualAttempt.event == row.id).order_by(ManualAttempt.id.desc()).limit(MAX_REQUESTS)
    )
    keys = [request.requested_by for request in requests if request.requested_by_kind == "api_key"]
    key_names = dict(ApiKey.select(ApiKey.id, ApiKey.name).where(ApiKey.id.in_(keys)).tuples()) if keys else {}
    return render_template(
        "console/event.html",
        event=row,
        tenant=Tenant.get_by_id(row.tenant_id),
        deliveries=deliveries,
        timelines=timelines,
        tier=lambda attempt: tier_label(ladder_nos[attempt.id], attempt.trigger, ladder),
        body_preview=BODY_PREVIEW,
        attempts_left_out=left_out,
        requests=requests,
        requested={(request.delivery_id, request.attempt_no): request for request in requests},  # the first asked
        requester=lambda request: requester_label(
            request.requested_by_kind, request.requested_by, key_names.get(request.requested_by)
        ),
        next_due_holds=lambda attempt, delivery: next_attempt_holds(
            attempt.attempt_no, attempt.next_attempt_at, delivery.attempts, delivery.status
        ),
    )


@bp.route("/deliveries/<delivery_id>/<any(resend, replay):action>", methods=["POST"])
@operator_required
def delivery_action(delivery_id: str, action: str) -> Response:
    """Queue a fresh attempt now: ``resend`` from the event page, ``replay`` of a dead letter."""
    row = get_or_404(Delivery, delivery_id, "delivery")
    return perform(
        action,
        "delivery",
        row.id,
        lambda: actions.resend(row, trigger=TRIGGERS[action], requester=staff_requester()),
        lambda _: f"{'Resend' if action == 'resend' else 'Replay'} of {row.id} queued: it is attempted now.",
        back(url_for("console.event", event_id=row.event_id, _anchor=row.id)),
        event_id=row.event_id,
        status_before=row.status,
    )
