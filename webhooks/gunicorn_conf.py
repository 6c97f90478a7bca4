"""gunicorn settings for the web process (``gunicorn -c python:webhooks.gunicorn_conf``)."""

from __future__ import annotations

import os

from webhooks.metrics import child_exit  # noqa: F401 - gunicorn reads the hook by name

#: ``BIND`` and ``WEB_CONCURRENCY`` as in the Procfile's environment.
bind = os.environ.get("BIND", "127.0.0.1:8000")
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
accesslog = "-"
