"""The Flask application factory and the registration of the ``flask`` CLI commands."""

from __future__ import annotations

from typing import Any, Mapping

from flask import Flask

from webhooks import site_files
from webhooks.config import Settings


def create_app(config: Mapping[str, Any] | None = None) -> Flask:
    """Build the web app. ``config`` may hold ``SETTINGS`` (a Settings) and Flask keys (tests)."""
    app = Flask(__name__, instance_relative_config=True)
    config = dict(config or {})
    settings: Settings = config.pop("SETTINGS", None) or Settings.from_env()
    settings = settings.with_secret_key(app.instance_path)
    app.config.update(
        SECRET_KEY=settings.secret_key,
        MAX_CONTENT_LENGTH=settings.max_body_bytes,
        API_TITLE="Webhooks",
        API_VERSION="v1",
        OPENAPI_VERSION="3.0.3",
        OPENAPI_URL_PREFIX="/",
        OPENAPI_JSON_PATH="openapi.json",
    )
    app.config.update(config)
    # Payloads keep the order their keys were received in (the feed ``flask listen`` signs
    # from included).
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions["webhooks.settings"] = settings

    from webhooks import logs, sealing
    from webhooks.messaging import enqueuer
    from webhooks.storage import db
    from webhooks.web import init_web

    logs.configure()
    sealing.configure(settings.secrets_key, app.instance_path)
    db.init_app(app, settings)
    enqueuer.init_app(app, settings.amqp_url, settings.publish_timeout, settings.topology)
    init_web(app)
    site_files.init_app(app)

    from webhooks import cli, console, listen, portal, secrets_cli

    cli.init_app(app)
    secrets_cli.init_app(app)
    console.init_app(app)
    portal.init_app(app)
    listen.init_app(app)
    return app
