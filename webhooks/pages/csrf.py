"""CSRF tokens: every state-changing form carries one, checked before the view runs.

Signed in, the token is an HMAC of the session's id under ``SECRET_KEY``: it dies with the
session (logout, a password change), and no table holds it. Before signing in (the login form),
it is a random value kept in Flask's signed cookie.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from flask import abort, current_app, request, session
from markupsafe import Markup

from webhooks.pages import sessions
from webhooks.pages.site import Site

#: Methods that change nothing, and so need no token.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

#: What a person reads when a form's token is missing or stale.
STALE_FORM = "The form had expired or did not come from this site. Reload the page and try again."


def session_token(secret_key: str, session_id: str) -> str:
    """The CSRF token of the session ``session_id`` (the id stored: the hash of its cookie)."""
    return hmac.new(secret_key.encode(), f"csrf:{session_id}".encode(), hashlib.sha256).hexdigest()


def expected_token(site: Site) -> str | None:
    """The token this request's forms must carry (None: no token was ever given out)."""
    row = sessions.current(site)
    if row is not None:
        return session_token(str(current_app.config["SECRET_KEY"]), row.id)
    return session.get("csrf")


def csrf_token(site: Site) -> str:
    """The token to put in a form (made on first use before signing in)."""
    token = expected_token(site)
    if token is None:
        token = session["csrf"] = secrets.token_urlsafe(32)
    return token


def csrf_field(site: Site) -> Markup:
    """The hidden input every POST form of the kit carries."""
    return Markup('<input type="hidden" name="csrf_token" value="{}">').format(csrf_token(site))


def check(site: Site) -> None:
    """400 for a state-changing request without this session's token."""
    if request.method in SAFE_METHODS:
        return
    sent, expected = request.form.get("csrf_token", ""), expected_token(site)
    if not sent or not expected or not hmac.compare_digest(sent.encode(), expected.encode()):
        abort(400, STALE_FORM)
