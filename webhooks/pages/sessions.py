"""Server-side sessions: a random token in an HttpOnly cookie, its hash in ``page_session``.

Every request looks its session up, so ending one (logout), or all of a subject's (a password
change, a disabled account, a revoked portal access) takes effect on the next request, in every
process. The cookie is scoped to the site's path, ``Secure`` whenever the request came over HTTPS
(``webhooks.pages.proxy``) or ``PUBLIC_URL`` is https, and SameSite as the site says.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from flask import Response, current_app, g, request

from webhooks.pages.models import PageSession
from webhooks.pages.proxy import served_over_https
from webhooks.pages.site import Site
from webhooks.storage.db import retrying, write
from webhooks.storage.timeutil import utcnow

#: Marks ``g`` when this request looked its session up already (the answer may be None).
_LOOKED_UP = object()


def digest(token: str) -> str:
    """What is stored for a cookie's token."""
    return hashlib.sha256(token.encode()).hexdigest()


@retrying
def start(site: Site, subject: str, data: dict[str, Any] | None = None, lifetime: timedelta | None = None) -> PageSession:
    """Sign ``subject`` in on this browser: a new session row and its cookie on the response.

    Any session the browser had is ended first (a new token at each login: no session fixation)."""
    end(site)
    token = secrets.token_urlsafe(32)
    now = utcnow()
    with write():
        PageSession.delete().where(PageSession.expires_at < now).execute()  # sessions nobody ended
        row = PageSession.create(id=digest(token), site=site.name, subject=subject, data=data or {},
                                 created_at=now, expires_at=now + (lifetime or site.session_lifetime))
    g.page_session, g.page_cookie = row, (token, row.expires_at)
    return row


def current(site: Site) -> PageSession | None:
    """This request's session of ``site`` (None: none, expired or ended)."""
    found = g.get("page_session", _LOOKED_UP)
    if found is not _LOOKED_UP:
        return found
    token = request.cookies.get(site.cookie_name, "")
    row = _lookup(digest(token), site.name) if token else None
    g.page_session = row
    return row


@retrying
def _lookup(session_id: str, site_name: str) -> PageSession | None:
    row = PageSession.get_or_none((PageSession.id == session_id) & (PageSession.site == site_name))
    return row if row is not None and row.expires_at > utcnow() else None


@retrying
def end(site: Site) -> None:
    """End this browser's session of ``site`` (if any) and clear its cookie."""
    row = current(site)
    if row is not None:
        PageSession.delete().where(PageSession.id == row.id).execute()
    if row is not None or site.cookie_name in request.cookies:
        g.page_cookie = ("", None)
    g.page_session = None


@retrying
def end_all(site_name: str, subject: str) -> int:
    """End every session of ``subject`` on ``site_name``, in every browser; how many there were."""
    return int(PageSession.delete().where((PageSession.site == site_name) & (PageSession.subject == subject)).execute())


def secure_cookies() -> bool:
    """Whether cookies set now get ``Secure``: the request came over HTTPS, or the service's public URL is https."""
    return served_over_https(request) or current_app.extensions["webhooks.settings"].public_url.startswith("https://")


def write_cookie(site: Site, response: Response, path: str) -> None:
    """Set or clear the session cookie if this request started or ended a session."""
    pending = g.get("page_cookie")
    if pending is None:
        return
    token, expires = pending
    embedded = site.cookie_samesite == "None"  # a site shown in other sites' frames (the portal)
    response.set_cookie(
        site.cookie_name, token, expires=expires if token else 0, path=path,
        secure=secure_cookies() or embedded,  # browsers refuse SameSite=None without Secure
        httponly=True, samesite=site.cookie_samesite,
        partitioned=embedded,  # kept per embedding site (CHIPS), where third-party cookies are blocked
    )
