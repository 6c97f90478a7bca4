"""Per-tenant admission: at most ``TENANT_MAX_CONCURRENT_REQUESTS`` API requests of one tenant in progress.

A web process serves requests on a few threads (gunicorn ``gthread``, ``WEB_THREADS``).
Without a cap, one tenant posting batches over many connections takes every thread and
every other tenant's request waits behind its batches. So, as Stripe's concurrent-requests
limiter does, a tenant may have at most ``limit`` authenticated requests in progress in
this process; one more is refused at once (429, ``Retry-After: 1``) before anything is
written, and the threads it did not get serve the other tenants.

Admitted is not yet running. While another tenant has had a request admitted in this
process within the last second (``tenant_share.SHARE_WINDOW_SECONDS``), a tenant runs one
request at a time here and its other admitted requests wait their turn (``ConcurrencyLimit.run``); a tenant alone
runs up to ``limit``. A process runs Python one thread at a time (the GIL): a flooding
tenant's four batches running at once took four shares of it, and another tenant's lone
event waited behind them at every step in the process (its request, then its publish).
In the flood benchmark that tenant's p99 from POST to arrival was 1.1-1.6 s without this
share (four runs) and 0.38-0.57 s with it (five runs, the same hour). The flooder loses
little: its requests are CPU-bound in the process.

How a request is counted: ``Admission`` wraps the whole WSGI app and puts a ``Slot`` in
the request's environ; whoever identifies the tenant by its API key (the fast ingest path,
or ``auth.require_tenant`` for the views) takes it with ``admit``; ``Admission`` gives it
back in a ``finally`` when the app returns, whether the request succeeded, failed or the
client went away. A request takes at most one slot, also when the fast path hands it over
to the views. The count is per process (gunicorn workers do not share it); ``0`` turns it off.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterable

from flask import Flask

from webhooks.tenant_share import RecentTenants, count_down

#: Seconds a refused client should wait: a slot frees as soon as one of its requests ends.
RETRY_AFTER = 1.0

#: environ key of the request's ``Slot``.
SLOT = "webhooks.admission.slot"

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class TooManyConcurrentRequests(Exception):
    """The tenant already has ``limit`` requests in progress in this process; nothing was done."""

    retry_after = RETRY_AFTER

    def __init__(self, limit: int) -> None:
        super().__init__(f"too many concurrent requests: this tenant already has {limit} in progress, the most "
                         f"one server process handles at once for a tenant; retry in {RETRY_AFTER:g}s")
        self.limit = limit


class ConcurrencyLimit:
    """Requests in progress per tenant, at most ``limit`` each, and how many of them run (one lock)."""

    def __init__(self, limit: int, clock: Callable[[], float] = time.monotonic) -> None:
        if limit < 1:
            raise ValueError(f"a concurrency limit is at least 1 (got {limit})")
        self.limit = limit
        self._clock = clock
        self._counts: dict[str, int] = {}
        self._running: dict[str, int] = {}
        self._seen = RecentTenants()  # tenants with a request admitted lately
        self._lock = threading.Lock()
        self._turn = threading.Condition(self._lock)

    def try_enter(self, tenant_id: str) -> bool:
        """Count one more request of ``tenant_id`` if it has fewer than ``limit``; False if it has not."""
        with self._lock:
            count = self._counts.get(tenant_id, 0)
            if count >= self.limit:
                return False
            self._counts[tenant_id] = count + 1
            self._seen.seen(tenant_id, self._clock())
            return True

    def leave(self, tenant_id: str) -> None:
        """One request of ``tenant_id`` ended (a tenant with none left is forgotten)."""
        with self._lock:
            count_down(self._counts, tenant_id)

    def run(self, tenant_id: str) -> None:
        """Block until one more admitted request of ``tenant_id`` may run (``share``), and count it."""
        with self._turn:
            self._turn.wait_for(lambda: self._running.get(tenant_id, 0) < self.share(tenant_id))
            self._running[tenant_id] = self._running.get(tenant_id, 0) + 1

    def stop_running(self, tenant_id: str) -> None:
        """A running request of ``tenant_id`` ended: the next of its admitted requests may run."""
        with self._turn:
            count_down(self._running, tenant_id)
            self._turn.notify_all()

    def share(self, tenant_id: str) -> int:
        """Requests ``tenant_id`` may run at once: ``limit`` alone, 1 while another tenant is active.
        Called with the lock held."""
        return 1 if self._seen.others_active(tenant_id, self._clock()) else self.limit

    def in_progress(self, tenant_id: str) -> int:
        with self._lock:
            return self._counts.get(tenant_id, 0)

    def tenants(self) -> int:
        """How many tenants have a request in progress (tenants with none are not kept)."""
        with self._lock:
            return len(self._counts)


class Slot:
    """One request's place in a ``ConcurrencyLimit``: taken once its tenant is known, given back at its end.

    Used by the one thread that serves the request, so it needs no lock of its own.
    """

    def __init__(self, limit: ConcurrencyLimit) -> None:
        self.limit = limit
        self.tenant_id: str | None = None
        self.running = False

    def take(self, tenant_id: str) -> None:
        """Count this request for ``tenant_id``, or raise ``TooManyConcurrentRequests``; then wait
        for its turn to run (``ConcurrencyLimit.run``).

        Taking it again for the same tenant (the views after the fast path) is a no-op.
        """
        if self.tenant_id == tenant_id:
            return
        self.release()
        if not self.limit.try_enter(tenant_id):
            raise TooManyConcurrentRequests(self.limit.limit)
        self.tenant_id = tenant_id
        self.limit.run(tenant_id)
        self.running = True

    def release(self) -> None:
        if self.tenant_id is not None:
            tenant_id, self.tenant_id = self.tenant_id, None
            if self.running:
                self.running = False
                self.limit.stop_running(tenant_id)
            self.limit.leave(tenant_id)


class Admission:
    """WSGI middleware, outermost: gives each request a ``Slot`` and releases it when the app returns.

    The app has built the whole body by then (no /v1 route streams), so the slot is free
    while the server writes it out.
    """

    def __init__(self, wsgi_app: WSGIApp, limit: ConcurrencyLimit) -> None:
        self.wsgi_app, self.limit = wsgi_app, limit

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        slot = environ[SLOT] = Slot(self.limit)
        try:
            return self.wsgi_app(environ, start_response)
        finally:
            slot.release()


def admit(environ: dict[str, Any], tenant_id: str) -> None:
    """Count this request for ``tenant_id`` (or raise ``TooManyConcurrentRequests``); a no-op when admission is off."""
    slot = environ.get(SLOT)
    if slot is not None:
        slot.take(tenant_id)


def install(app: Flask, limit: int) -> None:
    """Put ``Admission`` around everything ``app`` serves (``limit`` 0: no limit, nothing installed).

    Call it after every other WSGI middleware, so that it is the outermost.
    """
    if limit <= 0:
        return
    concurrency = ConcurrencyLimit(limit)
    app.extensions["webhooks.admission"] = concurrency
    app.wsgi_app = Admission(app.wsgi_app, concurrency)  # type: ignore[method-assign]
