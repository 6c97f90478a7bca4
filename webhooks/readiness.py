"""Health of the things the service needs: the database (required) and the broker."""

from __future__ import annotations

from webhooks.messaging.brokers import connect
from webhooks.storage.db import ping


def database_status() -> str:
    try:
        ping()
        return "ok"
    except Exception as error:  # noqa: BLE001 - any failure means "down", reported as text
        return f"down: {type(error).__name__}"


def broker_status(amqp_url: str, timeout: float = 1.0) -> str:
    try:
        connection = connect(amqp_url, timeout)
        connection.close()
        return "ok"
    except Exception as error:  # noqa: BLE001 - any failure means "down", reported as text
        return f"down: {type(error).__name__}"


def check(amqp_url: str | None = None) -> tuple[bool, dict[str, str]]:
    """(database is up, per-dependency status). The broker being down is degraded, not down."""
    if amqp_url is None:
        from flask import current_app

        amqp_url = current_app.extensions["webhooks.settings"].amqp_url
    checks = {"database": database_status(), "broker": broker_status(amqp_url)}
    return checks["database"] == "ok", checks
