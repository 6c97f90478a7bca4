"""gunicorn settings for the web process (``gunicorn -c python:webhooks.gunicorn_conf``).

Threaded workers (gunicorn's ``gthread``, as ``webhooks.server.worker`` extends it): each of
``WEB_CONCURRENCY`` processes reads requests in its event loop and runs up to ``WEB_THREADS``
whole requests at once, so a slow client holds no thread and a request is not queued behind
whole requests of others as with sync workers; whole requests wait for a thread in turns by
client (``webhooks.server.turns``), so one client's burst never takes all of a process's threads.

A request thread that waits on a socket (PostgreSQL, the client) and wakes while another
thread runs Python waits for the GIL up to the interpreter's switch interval, 5 ms by
default, at every such step. With a tenant's batch running, a single event's POST takes
several of those steps, so each web worker switches every ``GIL_SWITCH_INTERVAL`` instead:
in the flood benchmark the other tenant's POST p99 fell from 219-223 ms to 117-191 ms
(three interleaved pairs), and ingestion's throughput and CPU per event did not change
beyond their noise. The ``post_fork`` hook sets it in each worker (not at import: the
master, and anything else that imports this module, keep their own).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from webhooks.metrics import child_exit, spans_dropped  # noqa: F401 - gunicorn reads the hook by name
from webhooks.observability import tracing

#: ``BIND``, ``WEB_CONCURRENCY`` and ``WEB_THREADS`` as in the Procfile's environment.
bind = os.environ.get("BIND", "127.0.0.1:8000")
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
#: gunicorn's threaded worker, reading whole requests in its event loop before a thread sees them,
#: and handing them to threads in turns by client (``webhooks.server.worker``).
worker_class = "webhooks.server.worker.BufferingWorker"
threads = int(os.environ.get("WEB_THREADS", "8"))
accesslog = "-"
#: No control socket (``gunicornc``, unused here): its default path (``$XDG_RUNTIME_DIR/gunicorn.ctl``
#: or ``~/.gunicorn/gunicorn.ctl``) is shared by every instance a user runs, so starting a
#: second one unlinked the first one's socket and stopping either deleted the other's.
control_socket_disable = True

#: Seconds a thread may hold the GIL while another waits for it (the interpreter's default is 0.005).
GIL_SWITCH_INTERVAL = 0.001


def post_fork(server: Any, worker: Any) -> None:
    """gunicorn's hook, in each new worker process: switch threads every ``GIL_SWITCH_INTERVAL``, and
    start tracing (``OTEL_*``) in the process that makes the spans."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    tracing.configure("web", count_dropped=spans_dropped)


def worker_exit(server: Any, worker: Any) -> None:
    """gunicorn's hook, in a worker process that stops: export the spans it still holds."""
    tracing.shutdown()


if workers < 1 or threads < 1:
    raise ValueError(f"WEB_CONCURRENCY and WEB_THREADS must be at least 1 (got {workers} and {threads})")
