"""The portal as the page kit serves it, from the ``PORTAL_*`` settings: branding, framing, cookie."""

from __future__ import annotations

from datetime import timedelta

from webhooks.config import Settings
from webhooks.pages import Branding, Site
from webhooks.pages.site import frame_ancestors
from webhooks.portal.access import SITE_NAME


def portal_site(settings: Settings) -> Site:
    """The portal's site; a ValueError naming the ``PORTAL_*`` variable that cannot be used.

    Framed by other sites (``PORTAL_FRAME_ANCESTORS`` set), its cookie is ``SameSite=None``, which
    the kit makes ``Secure`` and ``Partitioned``; served on its own, ``SameSite=Lax``."""
    try:
        ancestors = frame_ancestors(settings.portal_frame_ancestors)
    except ValueError as error:
        raise ValueError(f"PORTAL_FRAME_ANCESTORS: {error}") from None
    try:
        branding = Branding(settings.portal_brand_name, settings.portal_logo_url, settings.portal_accent)
    except ValueError as error:
        raise ValueError(f"PORTAL_BRAND_NAME, PORTAL_LOGO_URL or PORTAL_ACCENT: {error}") from None
    return Site(
        name=SITE_NAME, branding=branding, home="portal.endpoints", layout="portal/base.html",
        frame_ancestors=ancestors, session_lifetime=timedelta(seconds=settings.portal_session_ttl),
        cookie_samesite="None" if ancestors else "Lax",
    )
