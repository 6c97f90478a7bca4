"""Svix app-portal access is our portal's one-time link (``webhooks.portal.access``): ``{url, token}``,
the token being the link's own; Svix capabilities become ours."""

from __future__ import annotations

from typing import Any

from flask import Blueprint

from webhooks.portal import access
from webhooks.portal import capabilities as caps
from webhooks.svix import apps, wire

#: A Svix ``AppPortalCapability`` as the portal capabilities it grants.
CAPABILITIES = {
    "ViewBase": (caps.VIEW,),
    "ViewEndpointSecret": (caps.VIEW, caps.VIEW_SECRETS),
    "ManageEndpointSecret": (caps.VIEW, caps.VIEW_SECRETS, caps.ROTATE_SECRETS),
    "ManageEndpoint": (caps.VIEW, caps.MANAGE_ENDPOINTS, caps.VIEW_SECRETS, caps.ROTATE_SECRETS),
    "CreateAttempts": (caps.VIEW, caps.RESEND),
}

blp = Blueprint("svix_portal", __name__)


def capabilities_of(data: dict[str, Any]) -> list[str] | None:
    """Ours for a Svix body: ``readOnly`` is view alone, ``capabilities`` mapped, neither is all (None)."""
    if data.get("readOnly"):
        return [caps.VIEW]
    names = data.get("capabilities")
    if names is None:
        return None
    if not isinstance(names, list) or any(name not in CAPABILITIES for name in names):
        wire.invalid(["body", "capabilities"], f"capabilities are names from {', '.join(CAPABILITIES)}")
    return sorted({cap for name in names for cap in CAPABILITIES[name]}, key=caps.ALL.index)


@blp.post("/auth/app-portal-access/<app_id>")
def portal_access(app_id: str) -> dict[str, Any]:
    """A one-time link to the application's portal (opened once, within ten minutes: ``expiry`` is not used)."""
    data = wire.body() if wire.has_body() else {}
    tenant = apps.app_for(app_id)
    link = access.create_link(tenant, capabilities_of(data))
    return {"url": link.url, "token": link.url.rsplit(access.ACCESS_PATH, 1)[-1]}
