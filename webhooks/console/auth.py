"""Staff accounts and sessions: password login, roles (viewer, operator), logout, password changes.

Sessions are the page kit's server-side sessions (``webhooks.pages.sessions``): the cookie holds
a random token, the database its hash, and every request looks it up. Logging out ends the
session; changing a password or deactivating an account ends all of that person's sessions, in
every browser, on the next request. CSRF tokens are bound to the session and die with it.

Logins are throttled per account and per client address (``login_throttle``): past the limit a
429 with ``Retry-After`` at once. A wrong password and an unknown email get the same message and
the same work (a password hash is checked either way); nothing sleeps.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable
from typing import Any, TypeVar

from flask import (
    abort,
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

from webhooks.errors import InvalidInput
from webhooks.console import login_throttle
from webhooks.console.blueprint import SITE, bp
from webhooks.console.models import ROLES, StaffUser
from webhooks.pages import sessions
from webhooks.pages.errors import safe_path
from webhooks.pages.proxy import client_address
from webhooks.storage.db import write
from webhooks.storage.timeutil import utcnow

#: Checked when the email is unknown, so that case takes as long as a wrong password.
_DUMMY_HASH = generate_password_hash(secrets.token_hex(16))

#: Console endpoints reachable without a session.
PUBLIC_ENDPOINTS = frozenset({"console.login", "console.static"})

#: The shortest password a staff account may have.
MIN_PASSWORD_LENGTH = 8

F = TypeVar("F", bound=Callable[..., Any])


class StaffError(InvalidInput):
    """A staff account could not be created or changed as asked."""


def _check_password(password: str) -> None:
    if len(password) < MIN_PASSWORD_LENGTH:
        raise StaffError(f"the password must be at least {MIN_PASSWORD_LENGTH} characters")


def create_staff(email: str, password: str, role: str) -> StaffUser:
    """A new staff account with a hashed password; StaffError for a bad role, email or password."""
    email = email.strip().lower()
    if role not in ROLES:
        raise StaffError(f"role must be one of {', '.join(ROLES)}")
    if "@" not in email:
        raise StaffError("the email must contain @")
    _check_password(password)
    with write():
        if StaffUser.select().where(StaffUser.email == email).exists():
            raise StaffError(f"a staff account {email} exists already")
        return StaffUser.create(email=email, password_hash=generate_password_hash(password), role=role)


def staff_named(email: str) -> StaffUser:
    """The account with this email; StaffError if there is none."""
    user = StaffUser.get_or_none(StaffUser.email == email.strip().lower())
    if user is None:
        raise StaffError(f"no staff account {email.strip().lower()}")
    return user


def set_password(user: StaffUser, password: str) -> int:
    """Give ``user`` a new password and end every session they have; how many were ended."""
    _check_password(password)
    with write():
        StaffUser.update(password_hash=generate_password_hash(password)).where(StaffUser.id == user.id).execute()
        return sessions.end_all(SITE.name, str(user.id))


def set_active(user: StaffUser, active: bool) -> int:
    """Activate or deactivate ``user``; deactivating ends every session they have (how many)."""
    with write():
        StaffUser.update(active=active).where(StaffUser.id == user.id).execute()
        return 0 if active else sessions.end_all(SITE.name, str(user.id))


def authenticate(email: str, password: str) -> StaffUser | None:
    """The active staff user with these credentials, or None (same work either way)."""
    user = StaffUser.get_or_none(StaffUser.email == email.strip().lower())
    valid = check_password_hash(user.password_hash if user else _DUMMY_HASH, password)
    return user if valid and user is not None and user.active else None


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
    return {"staff": g.get("staff")}


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
    row = sessions.current(SITE)
    if row is None:
        return None
    user = StaffUser.get_or_none(StaffUser.id == int(row.subject))
    return user if user is not None and user.active else None


def _safe_next(target: str | None) -> str:
    """Only paths inside the console: never an open redirect to another site."""
    return safe_path(target, "/console", url_for("console.overview"))


@bp.route("/login", methods=["GET", "POST"])
def login() -> Response | str | tuple[str, int, dict[str, str]]:
    """The login form; a session on success, a 429 at once past the throttle's limits."""
    if request.method == "GET":
        if g.get("staff"):
            return redirect(_safe_next(request.args.get("next")))
        return render_template("console/login.html", next=request.args.get("next", ""))
    email, address = request.form.get("email", "").strip().lower(), client_address(request)
    with login_throttle.login_slot() as free:
        refusal = login_throttle.take_attempt(email, address, utcnow()) if free else login_throttle.BUSY
        if refusal is not None:
            return _login_again(str(refusal), 429, {"Retry-After": str(refusal.retry_after)})
        user = authenticate(email, request.form.get("password", ""))
        if user is None:
            return _login_again("Email or password is incorrect.", 401)
        login_throttle.forgive(email, address, utcnow())
    session.pop("csrf", None)  # the login form's token: signed in, the session's own is used
    sessions.start(SITE, str(user.id))
    StaffUser.update(last_login_at=utcnow()).where(StaffUser.id == user.id).execute()
    return redirect(_safe_next(request.form.get("next")), 303)


def _login_again(message: str, status: int, headers: dict[str, str] | None = None) -> tuple[str, int, dict[str, str]]:
    flash(message, "error")
    page = render_template("console/login.html", next=request.form.get("next", ""), email=request.form.get("email", ""))
    return page, status, headers or {}


@bp.route("/logout", methods=["POST"])
def logout() -> Response:
    sessions.end(SITE)
    flash("You are logged out.", "info")
    return redirect(url_for("console.login"), 303)
