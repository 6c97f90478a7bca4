"""The console's pages, one module per kind of page; importing them registers their routes."""

from webhooks.console.views import (
    audit_log,
    dead_letters,
    endpoints,
    event_types,
    events,
    overview,
    search,
)

__all__ = ["audit_log", "dead_letters", "endpoints", "event_types", "events", "overview", "search"]
