"""Logging: one line per event of interest, ``key=value`` ids in the message, to stderr."""

from __future__ import annotations

import logging
import os

#: Format shared by every process, so the Procfile's combined output lines up.
FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def configure() -> None:
    """Configure the root logger once (``LOG_LEVEL``, default INFO); quiet chatty libraries."""
    root = logging.getLogger()
    if getattr(root, "_webhooks_configured", False):
        return
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "INFO").upper(), format=FORMAT)
    for noisy in ("pika", "httpx", "httpcore", "peewee"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    root._webhooks_configured = True  # type: ignore[attr-defined]
