"""What the console's views share (the portal's too): 404 lookups, safe redirects back, running an audited action."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import peewee
from flask import abort, flash, redirect, request
from werkzeug.wrappers import Response

from webhooks import actions
from webhooks.console import audit
from webhooks.console.auth import current_staff
from webhooks.console.queries import DeliveryFilter, FilterError
from webhooks.pages.errors import FieldErrors, safe_path

M = TypeVar("M", bound=peewee.Model)


def get_or_404(model: type[M], object_id: str | int, noun: str) -> M:
    """The row with this id, or the console's 404 page naming what was looked for."""
    row = model.get_or_none(model.id == object_id)
    if row is None:
        abort(404, f"No {noun} with the id {object_id}. Check the id, or search for it.")
    return row


def back(default: str) -> str:
    """Where a form asked to go afterwards (``next``), if it is a console path; else ``default``."""
    return safe_path(request.form.get("next"), "/console", default)


def staff_requester() -> actions.Requester:
    """Who asks, for resends and recovers made in the console: the staff member logged in."""
    return actions.Requester("staff", current_staff().email)


def perform(
    action: str,
    target_type: str,
    target_id: str,
    run: Callable[[], Any],
    done: Callable[[Any], str],
    redirect_to: str,
    *,
    event_id: str | None = None,
    actor: str | None = None,
    shown_at: Callable[[Any], str] | None = None,
    **detail: Any,
) -> Response:
    """Run an action, record it in the audit log (as ``actor``, by default the staff member signed
    in) and say how it went on the next page: ``redirect_to``, or where ``shown_at`` says its result
    is shown. The portal runs its changes through it too."""
    try:
        result = run()
    except (actions.BrokerUnavailable, ValueError) as error:  # e.g. a cancelled delivery
        flash(f"Nothing was changed: {error}.", "error")
        return redirect(redirect_to, 303)
    audit.record(actor or current_staff().email, action, target_type, target_id, event_id=event_id, **detail)
    flash(done(result), "success")
    return redirect(shown_at(result) if shown_at else redirect_to, 303)


def read_filter(args: Any, now: Any, **fixed: Any) -> tuple[DeliveryFilter, FieldErrors]:
    """The list filter from the query string and the errors per field (an empty filter when there are some)."""
    try:
        return DeliveryFilter.from_args(args, now, **fixed), FieldErrors()
    except FilterError as error:
        return DeliveryFilter(**fixed), FieldErrors({error.field: str(error)})
