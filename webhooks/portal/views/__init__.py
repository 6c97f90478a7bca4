"""The portal's pages, one module per kind of page; importing them registers their routes."""

from webhooks.portal.views import access_link, catalog, endpoint_actions, endpoints, events, tryouts

__all__ = ["access_link", "catalog", "endpoint_actions", "endpoints", "events", "tryouts"]
