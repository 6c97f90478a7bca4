"""Each worker's concurrency window per endpoint, as last reported: what the API, the console and /metrics show.

Windows live in the workers' memory; every few seconds each worker writes the ones
that changed here, one row per endpoint and worker. Readers add up the rows written
recently (a worker that died stops counting after ``FRESH_SECONDS``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Sequence

from peewee import fn

from webhooks.storage.db import retrying, write
from webhooks.storage.models import EndpointWindow
from webhooks.storage.timeutil import utcnow

#: A worker's row counts while it is younger than this (workers write every few seconds).
FRESH_SECONDS = 15.0

#: ``(endpoint id, window, ceiling, in flight)``
WindowRow = tuple[str, int, int, int]


@retrying
def save(worker: str, rows: Sequence[WindowRow], forgotten: Sequence[str]) -> None:
    """Write this worker's windows that changed, drop the ones of endpoints it no longer serves."""
    now = utcnow()
    with write():
        if rows:
            (
                EndpointWindow.insert_many(
                    [{"endpoint_id": endpoint_id, "worker": worker, "window": window, "ceiling": ceiling,
                      "in_flight": in_flight, "updated_at": now} for endpoint_id, window, ceiling, in_flight in rows]
                )
                .on_conflict(
                    conflict_target=[EndpointWindow.endpoint_id, EndpointWindow.worker],
                    preserve=[EndpointWindow.window, EndpointWindow.ceiling, EndpointWindow.in_flight, EndpointWindow.updated_at],
                )
                .execute()
            )
        if forgotten:
            EndpointWindow.delete().where(
                (EndpointWindow.worker == worker) & EndpointWindow.endpoint_id.in_(list(forgotten))
            ).execute()


@retrying
def forget_worker(worker: str) -> None:
    """A worker stops: its windows no longer count."""
    EndpointWindow.delete().where(EndpointWindow.worker == worker).execute()


def _fresh() -> object:
    return EndpointWindow.updated_at >= utcnow() - timedelta(seconds=FRESH_SECONDS)


def of_endpoints(endpoint_ids: Sequence[str]) -> dict[str, dict[str, int]]:
    """``{endpoint id: {window, ceiling, in_flight}}`` summed over the workers serving each now
    (an endpoint no worker serves is absent)."""
    if not endpoint_ids:
        return {}
    query = (
        EndpointWindow.select(EndpointWindow.endpoint_id, fn.SUM(EndpointWindow.window), fn.SUM(EndpointWindow.ceiling),
                              fn.SUM(EndpointWindow.in_flight))
        .where(EndpointWindow.endpoint_id.in_(list(endpoint_ids)) & _fresh())
        .group_by(EndpointWindow.endpoint_id)
        .tuples()
    )
    return {
        endpoint_id: {"window": int(window), "ceiling": int(ceiling), "in_flight": int(in_flight)}
        for endpoint_id, window, ceiling, in_flight in query
    }


def all_windows() -> list[int]:
    """Every endpoint's window summed over the workers serving it now (for /metrics)."""
    query = (
        EndpointWindow.select(fn.SUM(EndpointWindow.window))
        .where(_fresh())
        .group_by(EndpointWindow.endpoint_id)
        .tuples()
    )
    return [int(window) for window, in query]
