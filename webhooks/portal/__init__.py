"""The customer portal under /portal: one tenant's people manage their endpoints and see their events.

``access`` (one-time links, sessions, ending them) and ``capabilities`` (what a session may do)
are what the platform API calls (and ``cli``, the same from the command line); ``site`` builds the portal's page-kit site from the
``PORTAL_*`` settings, ``blueprint`` and ``auth`` serve and guard its pages, ``views/`` are the
pages. Pages are on the page kit (``webhooks.pages``) the console uses; changes go through
``webhooks.actions`` and are written to the console's audit log.

May import: every stage, the shared modules at the top, ``actions``, ``pages``, the console's
audit log and queries, and the API's request schemas (the same validation and messages); no
API view.
"""

from __future__ import annotations

from flask import Flask


def init_app(app: Flask) -> None:
    """Register the portal blueprint on the page kit, as the ``PORTAL_*`` settings say."""
    from webhooks import pages
    from webhooks.portal import auth, cli, views  # noqa: F401 - importing registers the routes
    from webhooks.portal.blueprint import bp
    from webhooks.portal.site import portal_site

    pages.register(app, bp, portal_site(app.extensions["webhooks.settings"]))
    cli.init_app(app)
