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

from webhooks import logs, metrics, sealing
from webhooks.observability import tracing
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
#: Each call in flight is about a hundred tracked objects (coroutines, futures, aiohttp's
#: request, response, parser, transport) that live as long as the endpoint takes to answer,
#: so every young collection scans the calls started since the one before. Measured with
#: 8,000-10,000 calls in flight to endpoints taking 5 s (no cyclic garbage found there at
#: all): at (10_000, 10, 100) the collector took 17-22 % of the worker's time (a young
#: collection every 0.3 s, a middle one of 0.25-0.4 s every 3 s); at these thresholds 8-11 %
#: (a young one of 0.3-0.5 s every 2-3 s, a middle one about every minute), and the worker
#: held 8,751 in flight on average instead of 7,644. Short-lived cycles (an error's
#: traceback) are still freed young; a full collection comes at most every 100 middle ones.
GC_THRESHOLDS = (50_000, 20, 100)


def tune_garbage_collector() -> None:
    """Collect less often, and never scan again what the process imported (``gc.freeze``)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def main() -> int:
    logs.configure()
    settings = Settings.from_env()
    db.init_database(settings.database_url)
    sealing.configure(settings.secrets_key)  # opens the endpoints' secrets (instance/secrets_key if unset)
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
    tracing.configure("worker", count_dropped=metrics.spans_dropped)
    try:
        return engine.run()
    finally:
        tracing.shutdown()  # the last attempts' spans


if __name__ == "__main__":
    sys.exit(main())
