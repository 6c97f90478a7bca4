"""What a customer does to an endpoint in the portal: disable, enable, delete (after a
confirmation), reveal and rotate its secret, send it a test event, recover its failed deliveries.
Each goes through ``webhooks.actions`` and is written to the console's audit log."""

from __future__ import annotations

from flask import current_app, g, render_template, request, url_for
from werkzeug.wrappers import Response

from webhooks import actions
from webhooks.secrecy import mask
from webhooks.console.formatting import parse_when
from webhooks.console.views.common import perform
from webhooks.delivery.signing import scheme_of
from webhooks.portal.auth import record, requires, visitor
from webhooks.portal.blueprint import bp
from webhooks.portal.capabilities import MANAGE_ENDPOINTS, RESEND, ROTATE_SECRETS, VIEW_SECRETS
from webhooks.portal.views.endpoints import live_endpoint
from webhooks.portal.views.endpoints import endpoint as endpoint_page


@bp.post("/endpoints/<endpoint_id>/<any(disable, enable):action>")
@requires(MANAGE_ENDPOINTS)
def endpoint_toggle(endpoint_id: str, action: str) -> Response:
    """Disable (no calls; new deliveries wait) or enable (what waited is sent, in order)."""
    endpoint, disabling = live_endpoint(endpoint_id), action == "disable"
    return perform(
        action, "endpoint", endpoint.id,
        lambda: actions.set_endpoint_disabled(endpoint, disabling, "disabled in the portal" if disabling else None),
        lambda _: ("Endpoint disabled: nothing is sent to it, new deliveries wait until you enable it." if disabling
                   else "Endpoint enabled: what waited for it is being sent, oldest first."),
        url_for("portal.endpoint", endpoint_id=endpoint.id), actor=visitor().actor,
    )


@bp.route("/endpoints/<endpoint_id>/delete", methods=["GET", "POST"])
@requires(MANAGE_ENDPOINTS)
def endpoint_delete(endpoint_id: str) -> Response | str:
    """Ask first; then delete: nothing more is sent to it, its history stays in the event log."""
    endpoint = live_endpoint(endpoint_id)
    if request.method == "GET":
        return render_template(
            "pages/confirm.html", question=f"Delete the endpoint {mask(endpoint.url)}?",
            consequence="Nothing more will be sent to it, and deliveries still waiting for it are cancelled. "
                        "Its past attempts stay in the event log. This cannot be undone.",
            action=url_for("portal.endpoint_delete", endpoint_id=endpoint.id), confirm="Delete this endpoint",
            cancel=url_for("portal.endpoint", endpoint_id=endpoint.id),
        )
    return perform("delete", "endpoint", endpoint.id, lambda: actions.delete_endpoint(endpoint),
                   lambda _: f"Endpoint {mask(endpoint.url)} deleted.", url_for("portal.endpoints"), actor=visitor().actor)


@bp.get("/endpoints/<endpoint_id>/secret")
@requires(VIEW_SECRETS)
def endpoint_secret(endpoint_id: str) -> Response:
    """The endpoint's page with its secret shown (never cached; each reveal is audited)."""
    endpoint = live_endpoint(endpoint_id)
    record("reveal_secret", "endpoint", endpoint.id)
    g.reveal_secret = True
    response = current_app.make_response(endpoint_page(endpoint_id))
    response.headers["Cache-Control"] = "no-store"
    return response


@bp.post("/endpoints/<endpoint_id>/secret/rotate")
@requires(ROTATE_SECRETS)
def endpoint_rotate(endpoint_id: str) -> Response:
    """A new secret now; the old one still signs alongside it for ``SECRET_ROTATION_OVERLAP``."""
    endpoint = live_endpoint(endpoint_id)
    overlap = current_app.extensions["webhooks.settings"].secret_rotation_overlap
    hours = overlap / 3600
    return perform(
        "rotate_secret", "endpoint", endpoint.id,
        lambda: actions.rotate_secret(endpoint, overlap, scheme_of(endpoint.secret)),
        lambda _: (f"Secret rotated. Requests carry a signature with the new secret and, for {hours:g} hours, one "
                   "with the old secret too: switch your receiver to the new secret within that time."),
        url_for("portal.endpoint_secret" if visitor().can(VIEW_SECRETS) else "portal.endpoint", endpoint_id=endpoint.id),
        actor=visitor().actor,
    )


@bp.post("/endpoints/<endpoint_id>/test")
@requires(MANAGE_ENDPOINTS)
def endpoint_test(endpoint_id: str) -> Response:
    """Send a test event to this endpoint alone, then show the event: its attempt appears when it lands."""
    endpoint = live_endpoint(endpoint_id)
    return perform("send_test_event", "endpoint", endpoint.id, lambda: actions.send_test_event(endpoint, visitor().actor),
                   lambda _: "Test event sent. Its attempt shows below as soon as your endpoint has answered.",
                   url_for("portal.endpoint", endpoint_id=endpoint.id), actor=visitor().actor,
                   shown_at=lambda event: url_for("portal.event", event_id=event.id))


@bp.post("/endpoints/<endpoint_id>/recover")
@requires(RESEND)
def endpoint_recover(endpoint_id: str) -> Response:
    """Send every failed delivery since a time again; deliveries waiting for the endpoint keep waiting."""
    endpoint, text = live_endpoint(endpoint_id), request.form.get("since", "")

    def recover() -> actions.Recovered:
        return actions.recover(endpoint, parse_when(text, g.now), requester=visitor().requester)

    return perform(
        "recover", "endpoint", endpoint.id, recover,
        lambda result: (f"{result.queued} failed deliveries since {text} are being sent again; "
                        f"{result.parked} waiting for the endpoint keep waiting, and are sent in order once it is back."),
        url_for("portal.endpoint", endpoint_id=endpoint.id), actor=visitor().actor, since=text,
    )
