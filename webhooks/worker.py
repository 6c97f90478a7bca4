"""The worker process: ``python -m webhooks.worker`` runs the delivery engine (``webhooks.delivery``).

The first SIGTERM or SIGINT (Ctrl-C) lets the deliveries in flight finish and be
recorded; a second exits at once (unacked messages return to the queue).
"""

from __future__ import annotations

import gc
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


#: The worker's thresholds for the cyclic garbage collector (Python's defaults: 700, 10, 10).
#: Each call in flight is a few hundred objects that live as long as the endpoint takes to
#: answer, long enough to reach the oldest generation; with 10,000 calls in flight to
#: endpoints taking 5 s, the default thresholds ran a full collection (~0.4 s over millions
#: of objects) about once a second: 40-50 % of the process's time. These run the young
#: collections a fourteenth as often and a full one at most every 100 middle ones (about
#: every 10 s at that load); short-lived cycles are still freed young.
GC_THRESHOLDS = (10_000, 10, 100)


def tune_garbage_collector() -> None:
    """Collect less often, and never scan again what the process imported (``gc.freeze``)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def main() -> int:
    logs.configure()
    settings = Settings.from_env()
    db.init_database(settings.database_url)
    raise_open_files_limit()
    tune_garbage_collector()
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
