"""The app in this process on a fresh stack's database (steps ``retention`` and ``portal``):
migrated, one tenant with one endpoint, and everything removed afterwards."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from bench.kit.stack import ServiceStack


@dataclass
class InProcess:
    """A fresh stack (no process started), the app on its settings, its test client, and tenant ``bench``
    (``create_tenant``'s answer: ``id``, ``api_key``) with one endpoint (its id)."""

    stack: ServiceStack
    app: Any
    client: Any
    tenant: dict[str, Any]
    endpoint: str


@contextmanager
def in_process(name: str, queues: bool = False) -> Iterator[InProcess]:
    """The service's database migrated (and with ``queues`` its queues declared) in this process; afterwards
    the database connections closed and the stack removed."""
    from app import create_app
    from tests.api_helpers import create_endpoint  # to the tests' HOOK_URL, where nothing listens
    from webhooks.cli import create_tenant, migrate
    from webhooks.config import Settings
    from webhooks.storage import db

    stack = ServiceStack(name)
    try:
        if queues:
            stack.release(database=False)
        db.init_database(stack.database_url)
        migrate()
        tenant = create_tenant("bench")
        app = create_app({"SETTINGS": Settings.from_env(env=stack.env)})
        logging.getLogger("webhooks").setLevel(logging.WARNING)  # no log line per request
        client = app.test_client()
        endpoint = create_endpoint(client, {"Authorization": f"Bearer {tenant['api_key']}"})["id"]
        yield InProcess(stack, app, client, tenant, endpoint)
    finally:
        if not db.database.is_closed():
            db.database.close()
        if hasattr(db.database.obj, "close_all"):
            db.database.obj.close_all()
        stack.remove()
