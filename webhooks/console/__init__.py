"""The support console under /console: staff find what happened to an event or endpoint, and fix it.

``blueprint`` and ``views/`` are the pages (on the page kit, ``webhooks.pages``), ``queries`` and
``stats`` what they read, ``charts`` and ``formatting`` how they show it, ``auth``,
``login_throttle`` and ``audit`` who is signed in, how often one may guess, and what they did,
``replay`` and ``cli`` the staff's resends and recoveries.

May import: every stage, the shared modules at the top, ``actions`` and ``pages``; not the API.
"""

from __future__ import annotations

from flask import Flask


def init_app(app: Flask) -> None:
    """Register the console blueprint on the page kit and its ``flask`` commands."""
    from webhooks import pages
    from webhooks.console import auth, cli, views  # noqa: F401 - importing registers the routes
    from webhooks.console.blueprint import SITE, bp

    pages.register(app, bp, SITE)
    cli.init_app(app)
