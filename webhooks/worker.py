"""The worker process: ``python -m webhooks.worker`` runs the delivery engine (``webhooks.delivery``).

The first SIGTERM or SIGINT (Ctrl-C) lets the deliveries in flight finish and be
recorded; a second exits at once (unacked messages return to the queue).
"""

from __future__ import annotations

import logging
import os
import resource
import signal
import sys
from typing import Any

from webhooks import logs
from webhooks.storage import db
from webhooks.config import Settings
from webhooks.delivery.engine import Engine

log = logging.getLogger(__name__)


def raise_open_files_limit() -> int:
    """Allow as many sockets as the system lets this process have: one per call in flight."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return hard
    return soft


def main() -> int:
    logs.configure()
    settings = Settings.from_env()
    db.init_database(settings.database_url)
    raise_open_files_limit()
    engine = Engine(settings)
    signals = {"count": 0}

    def on_signal(signum: int, _frame: Any) -> None:
        signals["count"] += 1
        if signals["count"] > 1:
            log.warning("second signal: exiting now; unacked messages return to the queue")
            os._exit(1)
        log.info("signal %d: finishing the deliveries in flight (send again to exit now)", signum)
        engine.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return engine.run()


if __name__ == "__main__":
    sys.exit(main())
