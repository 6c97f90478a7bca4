"""Trying an endpoint out from the portal, as the API's ``filter/test`` and ``send-example`` do: a
filter tested against an event (its type's example to start from; saved once it does what is
wanted), and a type's example sent to the endpoint alone as a test event."""

from __future__ import annotations

from flask import abort, flash, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from webhooks import actions
from webhooks.catalog import examples
from webhooks.console.views.common import perform
from webhooks.portal.auth import record, requires, visitor
from webhooks.portal.blueprint import bp
from webhooks.portal.capabilities import MANAGE_ENDPOINTS
from webhooks.portal.forms import catalog_entries
from webhooks.portal.tryouts import FIELDS, FilterTest, received_types
from webhooks.portal.views.endpoints import live_endpoint


@bp.route("/endpoints/<endpoint_id>/filter", methods=["GET", "POST"])
def endpoint_filter(endpoint_id: str) -> Response | tuple[str, int]:
    """Test a filter against an event of a chosen type (its example prefilled): would it be delivered,
    and if not, which condition failed. "Save" (with ``manage_endpoints``) makes it the endpoint's filter."""
    endpoint = live_endpoint(endpoint_id)
    entries = catalog_entries()
    received = received_types(endpoint, entries)
    if request.method == "GET":
        test = FilterTest.first(endpoint, received, request.args.get("event_type"))
    else:
        test = FilterTest.read(request.form)
        action = request.form.get("action", "test")
        if action == "example":
            test.use_example()
        else:
            test.run(endpoint)
        if action == "save" and not test.errors:
            if not visitor().can(MANAGE_ENDPOINTS):
                abort(403, "Your access to this portal does not include changing endpoints.")
            spec = test.spec or None
            if spec != endpoint.filter:
                actions.update_endpoint(endpoint, {"filter": spec})
                record("update", "endpoint", endpoint.id, changed=["filter"])
            flash("Filter saved: only events that match it are sent to this endpoint." if spec
                  else "Filter removed: every event of the types it receives is sent to this endpoint.", "success")
            return redirect(url_for("portal.endpoint", endpoint_id=endpoint.id), 303)
    types = list(dict.fromkeys([r.name for r in received] + [entry.name for entry in entries]
                               + [test.values["event_type"]] * ("event_type" not in test.errors)))
    status = 400 if test.errors else 200
    return render_template("portal/filter_test.html", endpoint=endpoint, test=test, fields=FIELDS,
                           types=types), status


@bp.post("/endpoints/<endpoint_id>/send-example")
@requires(MANAGE_ENDPOINTS)
def endpoint_send_example(endpoint_id: str) -> Response:
    """Send the type's example from the catalog to this endpoint alone, as a test event; then show the
    event, whose attempt appears when it lands."""
    endpoint, event_type = live_endpoint(endpoint_id), request.form.get("event_type", "")
    try:
        return perform(
            "send_example", "endpoint", endpoint.id,
            lambda: examples.send_example(visitor().tenant, endpoint, event_type).event,
            lambda _: f"Example of {event_type} sent. Its attempt shows below as soon as your endpoint has answered.",
            url_for("portal.endpoint", endpoint_id=endpoint.id), actor=visitor().actor,
            shown_at=lambda event: url_for("portal.event", event_id=event.id), event_type=event_type,
        )
    except examples.NoExample as error:
        abort(404, f"There is no example to send: {error}.")
