"""Opening a portal-access link (one use: it starts a session and goes to the portal), the pages
for links that open nothing, and signing out."""

from __future__ import annotations

from flask import redirect, render_template, url_for
from werkzeug.wrappers import Response

from webhooks.pages import current_site, sessions
from webhooks.portal import access
from webhooks.portal.blueprint import bp

#: The status of each refusal's page: an unknown link was never here; a used or expired one is gone.
REFUSAL_STATUS = {"unknown": 404, "used": 410, "expired": 410}


@bp.get("/access/<token>")
def open_link(token: str) -> Response | tuple[str, int]:
    """Open the link: a session for its tenant starts on this browser, then the portal's first page.

    A used link opened again by the browser whose session it started (the platform's page
    reloaded with the same link in its frame) goes on to the portal: that session is still its own."""
    try:
        access.open_link(current_site(), token)
    except access.LinkRefused as refused:
        live = sessions.current(current_site())
        if refused.reason == "used" and live is not None and live.subject == refused.tenant_id:
            return redirect(url_for("portal.endpoints"), 303)
        return render_template("portal/link_refused.html", reason=refused.reason), REFUSAL_STATUS[refused.reason]
    return redirect(url_for("portal.endpoints"), 303)


@bp.get("/signed-out")
def signed_out() -> tuple[str, int]:
    return render_template("portal/signed_out.html", ended=True, by_you=True), 200


@bp.post("/sign-out")
def sign_out() -> Response:
    """End this browser's session (the link it came from stays used)."""
    sessions.end(current_site())
    return redirect(url_for("portal.signed_out"), 303)
