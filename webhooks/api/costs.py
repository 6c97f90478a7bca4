"""What a request cost the service, told to the web server: the deliveries its events made.

The server hands threads out in turns by client (``webhooks.server.turns``) and, while
other clients are active, paces a client by the deliveries its requests made
(``TENANT_SHARED_DELIVERY_RATE``): a batch fanned out to ten endpoints makes ten times the
work of one that is not, and everything after the web tier (the broker, the workers,
the database) has to carry it. The ingest paths put the count in the request's WSGI
environ under ``COST``; the server reads it once the request is answered.
"""

from __future__ import annotations

from typing import Any, Iterable

from webhooks.ingest.plan import Accepted

#: WSGI environ key of the deliveries a request made.
COST = "webhooks.deliveries_made"


def record_deliveries(environ: dict[str, Any], accepted: Iterable[Accepted]) -> None:
    """Count the deliveries of the newly accepted events (a replay made none) in ``environ``."""
    made = sum(len(a.deliveries) for a in accepted if not a.replayed)
    environ[COST] = environ.get(COST, 0) + made
