"""Trying an endpoint out: a filter tested against an event, and a type's example sent to it as a
test event (``"test": true``) through the real pipeline, to that endpoint alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from webhooks.errors import NotFound
from webhooks.catalog import store
from webhooks.catalog.filters import compile_filter, event_view
from webhooks.event_types import wants
from webhooks.ingest.accept import accept_test_event
from webhooks.ingest.plan import Accepted
from webhooks.storage.models import Endpoint, Tenant
from webhooks.storage.timeutil import isoformat, utcnow

#: The id a tested event is given (it is never stored).
TEST_EVENT_ID = "evt_test"

class NoExample(NotFound):
    """The event type has no example to send (unknown, none given, or not that many)."""


@dataclass(frozen=True)
class FilterVerdict:
    """Whether an event would reach the endpoint: its subscription, its filter, and why not."""

    subscribed: bool
    matches: bool
    failed: str | None


def try_filter(endpoint: Endpoint, event_type: str, payload: dict[str, Any],
               spec: dict[str, Any] | None = None, use_endpoint_filter: bool = True) -> FilterVerdict:
    """``spec`` (or, when not given, the endpoint's own filter) against an event of ``event_type`` and ``payload``."""
    endpoint_filter = compile_filter(endpoint.filter if use_endpoint_filter else spec)
    failed = None
    if endpoint_filter is not None:
        failed = endpoint_filter.explain(event_view(TEST_EVENT_ID, event_type, isoformat(utcnow()) or "", payload))
    return FilterVerdict(wants(endpoint.event_types, event_type), failed is None, failed)


def example_of(event_type: str, index: int = 0) -> dict[str, Any]:
    """The ``index``-th example of ``event_type`` in the catalog, or NoExample saying why there is none."""
    entry = store.get(event_type)
    if entry is None:
        raise NoExample(f"event type {event_type!r} is not in the catalog")
    if not entry.examples:
        raise NoExample(f"event type {event_type!r} has no example in the catalog")
    if index >= len(entry.examples):
        raise NoExample(f"event type {event_type!r} has {len(entry.examples)} example(s): index {index} is past them")
    return entry.examples[index]


def send_example(tenant: Tenant, endpoint: Endpoint, event_type: str, index: int = 0) -> Accepted:
    """Send the example to ``endpoint`` alone, as a test event (in a request: published after the answer)."""
    return accept_test_event(tenant, endpoint.id, event_type, example_of(event_type, index))
