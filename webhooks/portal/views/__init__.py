"""The portal's pages, one module per kind of page; importing them registers their routes."""

from webhooks.portal.views import access_link, endpoint_actions, endpoints, events

__all__ = ["access_link", "endpoint_actions", "endpoints", "events"]
