"""gunicorn settings for the web process (``gunicorn -c python:webhooks.gunicorn_conf``).

Threaded workers (``gthread``): each of ``WEB_CONCURRENCY`` processes serves up to
``WEB_THREADS`` requests at once, so a request is not queued behind whole requests of
others as with sync workers; ``TENANT_MAX_CONCURRENT_REQUESTS`` (``webhooks.api.admission``)
keeps one tenant from taking all of a process's threads.
"""

from __future__ import annotations

import os

from webhooks.metrics import child_exit  # noqa: F401 - gunicorn reads the hook by name

#: ``BIND``, ``WEB_CONCURRENCY`` and ``WEB_THREADS`` as in the Procfile's environment.
bind = os.environ.get("BIND", "127.0.0.1:8000")
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
worker_class = "gthread"
threads = int(os.environ.get("WEB_THREADS", "8"))
accesslog = "-"

if workers < 1 or threads < 1:
    raise ValueError(f"WEB_CONCURRENCY and WEB_THREADS must be at least 1 (got {workers} and {threads})")
