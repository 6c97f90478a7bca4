"""The web app with a gate, for tests that run it under a real gunicorn (``tests.gated_app:create_app()``).

Events of the tenant ``GATE_TENANT`` wait inside ingestion (after authentication, before
anything is written) until the test lets them go: each one connects to
``127.0.0.1:GATE_PORT``, where the test listens, and waits there for one byte. The test
thereby knows exactly how many are held, without relying on timing.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from flask import Flask

import app
from webhooks.ingest import accept

#: How long a held request waits for the test at most (seconds).
HOLD_AT_MOST = 60.0


def _wait_at_gate() -> None:
    with socket.create_connection(("127.0.0.1", int(os.environ["GATE_PORT"])), timeout=HOLD_AT_MOST) as gate:
        gate.recv(1)


def create_app() -> Flask:
    """``app.create_app()`` with ``GATE_TENANT``'s events held at the gate."""
    original = accept.accept_events

    def gated(tenant: Any, items: Any, **kwargs: Any) -> Any:
        if tenant.id == os.environ["GATE_TENANT"]:
            _wait_at_gate()
        return original(tenant, items, **kwargs)

    accept.accept_events = gated  # type: ignore[assignment]
    return app.create_app()
