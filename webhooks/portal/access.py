"""Portal access: one-time links that open a portal session for one tenant, and ending them.

A link's URL holds a random token; ``portal_link`` keeps its SHA-256, the tenant, the
capabilities and the expiry. Opening it marks it used in the same statement that checks it
(one use, however many browsers race) and starts a page-kit session (``webhooks.pages.sessions``,
site ``portal``, subject the tenant id, data the capabilities) that lasts ``PORTAL_SESSION_TTL``.
The platform API (``POST /v1/tenants/<id>/portal-access``, ``DELETE …/portal-sessions``) calls
``create_link`` and ``end_sessions``; the portal's opening page calls ``open_link``.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from flask import current_app

from webhooks.errors import InvalidInput, Refused
from webhooks.pages import sessions
from webhooks.pages.models import PageSession
from webhooks.pages.site import Site
from webhooks.portal import capabilities as caps
from webhooks.portal.models import PortalLink
from webhooks.storage.db import retrying, write
from webhooks.storage.models import Tenant
from webhooks.storage.timeutil import utcnow

#: The page kit's site name of the portal (``page_session.site``).
SITE_NAME = "portal"

#: Seconds a link may be opened in when ``expires_in`` is not given.
DEFAULT_EXPIRES_IN = 600
#: The shortest and longest ``expires_in`` accepted (a link is meant to be opened at once).
MIN_EXPIRES_IN, MAX_EXPIRES_IN = 30, 7 * 86_400

#: The path a link opens, under the service's ``PUBLIC_URL``.
ACCESS_PATH = "/portal/access/"


class AccessError(InvalidInput):
    """Bad input for a link: ``field`` names the request field (the API answers 422 with it)."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(message)


class LinkRefused(Refused):
    """A link that opens nothing: ``reason`` is ``unknown``, ``used`` or ``expired``; ``tenant_id``
    the tenant of a link that exists."""

    def __init__(self, reason: str, tenant_id: str | None = None) -> None:
        self.reason, self.tenant_id = reason, tenant_id
        super().__init__(reason)


@dataclass(frozen=True)
class AccessLink:
    """What the platform hands its customer: the one-time ``url``, to be opened before ``expires_at``."""

    url: str
    expires_at: datetime
    capabilities: tuple[str, ...]


def _expires_in(value: int | None) -> int:
    if value is None:
        return DEFAULT_EXPIRES_IN
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_EXPIRES_IN <= value <= MAX_EXPIRES_IN:
        raise AccessError("expires_in", f"expires_in must be a whole number of seconds from {MIN_EXPIRES_IN} "
                                        f"to {MAX_EXPIRES_IN:,} (7 days); got {value!r}")
    return value


def _capabilities(requested: list[str] | None) -> tuple[str, ...]:
    if requested is not None and not isinstance(requested, (list, tuple)):
        raise AccessError("capabilities", f"capabilities must be a list of names from {', '.join(caps.ALL)}")
    try:
        return caps.granted(requested)
    except caps.UnknownCapability as error:
        raise AccessError("capabilities", str(error)) from None


@retrying
def create_link(
    tenant: Tenant, capabilities: list[str] | None = None, expires_in: int | None = None, *, public_url: str | None = None
) -> AccessLink:
    """A one-time link to ``tenant``'s portal with these capabilities (None: all of them), to be
    opened within ``expires_in`` seconds (default 10 minutes). AccessError names a bad field."""
    granted, lifetime = _capabilities(capabilities), _expires_in(expires_in)
    base = (public_url or current_app.extensions["webhooks.settings"].public_url).rstrip("/")
    token = secrets.token_urlsafe(32)
    now = utcnow()
    expires_at = now + timedelta(seconds=lifetime)
    with write():
        PortalLink.delete().where(PortalLink.expires_at < now - timedelta(days=1)).execute()  # links nobody opened
        PortalLink.create(id=sessions.digest(token), tenant=tenant.id, capabilities=list(granted),
                          created_at=now, expires_at=expires_at)
    return AccessLink(url=f"{base}{ACCESS_PATH}{token}", expires_at=expires_at, capabilities=granted)


@retrying
def end_sessions(tenant: Tenant) -> int:
    """End every portal session of ``tenant`` at once, and void its links not opened yet; how many
    sessions there were."""
    with write():
        PortalLink.update(expires_at=utcnow()).where((PortalLink.tenant == tenant.id) & PortalLink.used_at.is_null()).execute()
        return sessions.end_all(SITE_NAME, tenant.id)


@retrying
def _use(token: str) -> PortalLink:
    """Mark the link used, if it can be: LinkRefused says why not."""
    link_id, now = sessions.digest(token), utcnow()
    with write():
        taken = (PortalLink.update(used_at=now)
                 .where((PortalLink.id == link_id) & PortalLink.used_at.is_null() & (PortalLink.expires_at > now))
                 .execute())
        link = PortalLink.get_or_none(PortalLink.id == link_id)
    if link is None:
        raise LinkRefused("unknown")
    if not taken:
        raise LinkRefused("used" if link.used_at is not None else "expired", link.tenant_id)
    return link


def open_link(site: Site, token: str) -> PageSession:
    """Open a link (in a request of the portal): its session starts on this browser. LinkRefused
    says why a link opens nothing (unknown, used, expired)."""
    link = _use(token)
    return sessions.start(site, link.tenant_id, {"capabilities": list(link.capabilities)})


def session_capabilities(row: PageSession) -> frozenset[str]:
    """What a portal session may do (``view`` at least)."""
    return frozenset(row.data.get("capabilities", ())) | {caps.VIEW}


def session_label(row: PageSession) -> str:
    """A short, stable name of a session for the audit log (the start of its stored hash; it opens nothing)."""
    return row.id[:12]


def actor(row: PageSession) -> str:
    """The audit log's actor for what a portal session does: ``portal:<tenant id>:<session>``."""
    return f"portal:{row.subject}:{session_label(row)}"
