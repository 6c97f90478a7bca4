"""The support console under /console: staff find what happened to an event or endpoint, and fix it.

``blueprint`` and ``views/`` are the pages, ``queries`` and ``stats`` what they read,
``charts`` and ``formatting`` how they show it, ``auth`` and ``audit`` who is signed in
and what they did, ``replay`` and ``cli`` the staff's resends and recoveries.

May import: every stage, the shared modules at the top and ``actions``; not the API.
"""

from __future__ import annotations

from flask import Flask


def init_app(app: Flask) -> None:
    """Register the console blueprint, its session-cookie settings and its ``flask`` commands."""
    from webhooks.console import auth, cli, views  # noqa: F401 - importing registers the routes
    from webhooks.console.blueprint import bp

    settings = app.extensions["webhooks.settings"]
    app.config["SESSION_COOKIE_HTTPONLY"] = True
    app.config["SESSION_COOKIE_SAMESITE"] = app.config.get("SESSION_COOKIE_SAMESITE") or "Lax"
    if settings.public_url.startswith("https://"):
        app.config["SESSION_COOKIE_SECURE"] = True
    app.register_blueprint(bp)
    cli.init_app(app)
