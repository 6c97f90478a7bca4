"""The page kit the console and the portal share: what every server-rendered page needs.

``site`` (a blueprint's branding, framing and session cookie), ``kit`` (attaching a blueprint:
hooks, helpers, error pages; the layout, macros and stylesheet in ``templates/`` and ``static/``),
``headers`` (Content-Security-Policy and the other security headers, for pages and for the rest
of the service), ``sessions`` and ``models`` (server-side sessions), ``csrf``, ``proxy`` (the
client's address and scheme behind a trusted proxy), ``errors`` (errors in words, refusing NUL
and unsafe redirects) and ``text`` (times, durations, JSON for people); ``catalog`` and
``templates/pages/catalog.html`` list the event-type catalog (``webhooks.catalog``) by group, each
type's schema as a table of its fields (the ``schema_fields`` macro), its examples as JSON.

May import: ``storage``, ``catalog`` (what its pages show) and the shared modules at the top; not the faces (api, console, portal).
"""

from __future__ import annotations

from webhooks.pages.kit import attach, current_site, register, site_blueprint
from webhooks.pages.site import Branding, Site

__all__ = ["Branding", "Site", "attach", "current_site", "register", "site_blueprint"]
