"""Who is using the portal: the session a portal-access link opened, its tenant and capabilities.

Every page but the link itself needs a live session of the ``portal`` site (the page kit's
``page_session``); without one the browser gets a page saying the session ended (its cookie
names a session that is over) or how to get in (no cookie). A capability a view needs and the
session lacks is a 403; an object of another tenant is a 404, as if it did not exist.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import peewee
from flask import abort, g, render_template, request
from werkzeug.wrappers import Response

from webhooks.actions import Requester
from webhooks.console import audit
from webhooks.pages import current_site, sessions
from webhooks.pages.models import PageSession
from webhooks.portal import access
from webhooks.portal.blueprint import bp
from webhooks.portal.capabilities import MEANING
from webhooks.storage.models import Tenant

#: Portal endpoints reachable without a session.
PUBLIC_ENDPOINTS = frozenset({"portal.open_link", "portal.static", "portal.signed_out"})

M = TypeVar("M", bound=peewee.Model)
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Visitor:
    """The portal session of this request: whose it is and what it may do."""

    session: PageSession
    tenant: Tenant
    capabilities: frozenset[str]

    def can(self, capability: str) -> bool:
        return capability in self.capabilities

    @property
    def actor(self) -> str:
        return access.actor(self.session)

    @property
    def requester(self) -> Requester:
        """Who asks, for resends and recovers made in the portal."""
        return Requester("portal", self.actor)


def visitor() -> Visitor:
    return g.visitor


@bp.before_request
def require_session() -> Response | tuple[str, int] | None:
    """Load ``g.visitor`` from the session, or answer with the page that says how to get in."""
    row = sessions.current(current_site())
    tenant = Tenant.get_or_none(Tenant.id == row.subject) if row is not None else None
    if row is not None and tenant is not None:
        g.visitor = Visitor(row, tenant, access.session_capabilities(row))
        return None
    if request.endpoint in PUBLIC_ENDPOINTS:
        return None
    return signed_out_page()


def signed_out_page() -> tuple[str, int]:
    """401: the session ended or expired (the browser still holds its cookie), or there never was one."""
    ended = current_site().cookie_name in request.cookies
    return render_template("portal/signed_out.html", ended=ended), 401


@bp.context_processor
def auth_helpers() -> dict[str, Any]:
    return {"visitor": g.get("visitor"), "capability_meaning": MEANING}


def requires(capability: str) -> Callable[[F], F]:
    """Only sessions with ``capability``: others get 403 and nothing changes."""

    def decorate(view: F) -> F:
        @functools.wraps(view)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not visitor().can(capability):
                abort(403, f"Your access to this portal does not include this: {MEANING[capability]}. "
                           "Ask the company that gave you the link for access that does.")
            return view(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def owned_or_404(model: type[M], object_id: str, noun: str, *conditions: Any) -> M:
    """The tenant's row with this id, or 404 (another tenant's id is not found either)."""
    query = model.select().where((model.id == object_id) & (model.tenant == visitor().tenant.id), *conditions)
    row = query.first()
    if row is None:
        abort(404, f"There is no {noun} {object_id} here. Check the address, or go back to the list.")
    return row


def record(action: str, target_type: str, target_id: str, *, event_id: str | None = None, **detail: Any) -> None:
    """Write what this session did to the console's audit log (actor ``portal:<tenant>:<session>``)."""
    audit.record(visitor().actor, action, target_type, target_id, event_id=event_id, **detail)
