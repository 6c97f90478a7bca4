"""A short-lived, thread-safe cache of endpoint settings for the worker.

At most ``ttl`` seconds old, so a PATCH, delete or secret rotation applies from the
next attempt while a busy worker does not read the endpoint row for every message.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime

from webhooks.models import Endpoint

#: Upper bound on how stale an endpoint's settings may be (decision 10).
DEFAULT_TTL_SECONDS = 5.0


@dataclass(frozen=True)
class EndpointView:
    id: str
    url: str
    secret: str
    previous_secret: str | None
    previous_secret_until: datetime | None
    disabled: bool
    deleted: bool


class EndpointCache:
    def __init__(self, ttl: float = DEFAULT_TTL_SECONDS) -> None:
        self._ttl = ttl
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[float, EndpointView | None]] = {}

    def get(self, endpoint_id: str) -> EndpointView | None:
        """The endpoint's settings (None if it does not exist), read from the database when stale."""
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(endpoint_id)
        if entry is not None and now - entry[0] < self._ttl:
            return entry[1]
        row = Endpoint.get_or_none(Endpoint.id == endpoint_id)
        view = None
        if row is not None:
            view = EndpointView(
                id=row.id,
                url=row.url,
                secret=row.secret,
                previous_secret=row.previous_secret,
                previous_secret_until=row.previous_secret_until,
                disabled=row.disabled,
                deleted=row.deleted_at is not None,
            )
        with self._lock:
            self._entries[endpoint_id] = (now, view)
        return view

    def invalidate(self, endpoint_id: str) -> None:
        with self._lock:
            self._entries.pop(endpoint_id, None)
