"""Staff accounts and sessions: password login, roles (viewer, operator), CSRF tokens, logout.

Sessions are Flask's signed cookie (HttpOnly, SameSite=Lax). Every POST inside /console
carries the session's CSRF token; a missing or stale one is a 400. A wrong password gets
one generic message after a delay, whether or not the email exists.
"""

from __future__ import annotations

import functools
import hmac
import secrets
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar
from urllib.parse import urlparse

from flask import (
    abort,
    current_app,
    flash,
    g,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from werkzeug.security import check_password_hash, generate_password_hash
from werkzeug.wrappers import Response

from webhooks.console.blueprint import bp
from webhooks.console.models import ROLES, StaffUser
from webhooks.storage.db import write
from webhooks.storage.timeutil import utcnow

#: Seconds a failed login waits before answering (``CONSOLE_LOGIN_DELAY`` overrides it).
LOGIN_FAILURE_DELAY = 1.0

#: A session older than this must log in again.
SESSION_LIFETIME = timedelta(hours=12)

#: Checked when the email is unknown, so that case takes as long as a wrong password.
_DUMMY_HASH = generate_password_hash(secrets.token_hex(16))

#: Console endpoints reachable without a session.
PUBLIC_ENDPOINTS = frozenset({"console.login", "console.static"})

F = TypeVar("F", bound=Callable[..., Any])


class StaffError(ValueError):
    """A staff account could not be created as asked."""


def create_staff(email: str, password: str, role: str) -> StaffUser:
    """A new staff account with a hashed password; StaffError for a bad role, email or password."""
    email = email.strip().lower()
    if role not in ROLES:
        raise StaffError(f"role must be one of {', '.join(ROLES)}")
    if "@" not in email:
        raise StaffError("the email must contain @")
    if len(password) < 8:
        raise StaffError("the password must be at least 8 characters")
    with write():
        if StaffUser.select().where(StaffUser.email == email).exists():
            raise StaffError(f"a staff account {email} exists already")
        return StaffUser.create(email=email, password_hash=generate_password_hash(password), role=role)


def authenticate(email: str, password: str) -> StaffUser | None:
    """The active staff user with these credentials, or None (same work either way)."""
    user = StaffUser.get_or_none(StaffUser.email == email.strip().lower())
    valid = check_password_hash(user.password_hash if user else _DUMMY_HASH, password)
    return user if valid and user is not None and user.active else None


def csrf_token() -> str:
    """The session's CSRF token (made on first use)."""
    if "csrf" not in session:
        session["csrf"] = secrets.token_urlsafe(32)
    return str(session["csrf"])


def current_staff() -> StaffUser:
    """The logged-in staff user of this request."""
    return g.staff


def operator_required(view: F) -> F:
    """Operators only: a viewer gets 403."""

    @functools.wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not current_staff().is_operator:
            abort(403, "This action needs the operator role; ask an operator or an administrator.")
        return view(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


@bp.context_processor
def auth_helpers() -> dict[str, Any]:
    return {"csrf_token": csrf_token, "staff": g.get("staff")}


@bp.before_request
def check_csrf() -> None:
    """Every state-changing request carries the session's token (a 400 otherwise)."""
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return
    sent, expected = request.form.get("csrf_token", ""), session.get("csrf")
    if not sent or not expected or not hmac.compare_digest(str(sent), str(expected)):
        abort(400, "The form had expired or did not come from the console. Reload the page and try again.")


@bp.before_request
def require_login() -> Response | None:
    """Load ``g.staff`` from the session, or send the browser to the login page."""
    user = _session_user()
    if user is not None:
        g.staff = user
        return None
    if request.endpoint in PUBLIC_ENDPOINTS:
        return None
    return redirect(url_for("console.login", next=request.full_path if request.method == "GET" else None))


def _session_user() -> StaffUser | None:
    staff_id, started = session.get("staff_id"), session.get("login_at", 0)
    if staff_id is None or time.time() - started > SESSION_LIFETIME.total_seconds():
        return None
    user = StaffUser.get_or_none(StaffUser.id == staff_id)
    return user if user is not None and user.active else None


def _safe_next(target: str | None) -> str:
    """Only paths inside the console: never an open redirect to another site."""
    if target:
        parsed = urlparse(target)
        if not parsed.scheme and not parsed.netloc and target.startswith("/console") and "\\" not in target:
            return target
    return url_for("console.overview")


@bp.route("/login", methods=["GET", "POST"])
def login() -> Response | str | tuple[str, int]:
    """The login form; a session cookie on success."""
    if request.method == "GET":
        if g.get("staff"):
            return redirect(_safe_next(request.args.get("next")))
        return render_template("console/login.html", next=request.args.get("next", ""))
    user = authenticate(request.form.get("email", ""), request.form.get("password", ""))
    if user is None:
        time.sleep(current_app.config.get("CONSOLE_LOGIN_DELAY", LOGIN_FAILURE_DELAY))
        flash("Email or password is incorrect.", "error")
        page = render_template("console/login.html", next=request.form.get("next", ""), email=request.form.get("email", ""))
        return page, 401
    session.clear()
    session.update(staff_id=user.id, login_at=time.time(), csrf=secrets.token_urlsafe(32))
    StaffUser.update(last_login_at=utcnow()).where(StaffUser.id == user.id).execute()
    return redirect(_safe_next(request.form.get("next")), 303)


@bp.route("/logout", methods=["POST"])
def logout() -> Response:
    session.clear()
    flash("You are logged out.", "info")
    return redirect(url_for("console.login"), 303)
