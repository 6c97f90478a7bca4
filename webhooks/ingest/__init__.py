"""Ingest: accepting events, the first stage of an event's path.

``auth_keys`` (tenant API keys: who is sending), ``idempotency`` (a key names one event
for 24 hours), ``plan`` (the rows a batch writes: events, keys, a delivery per
subscribed endpoint), ``fallback`` (the copy an endpoint's fallback gets of an event the
endpoint misses while away: made here at fan-out, and by the worker where a delivery parks),
``accept`` (one transaction stores them, then hands the messages to the outbox). The HTTP side of it is
``webhooks.api.events`` and ``webhooks.api.fast_ingest``.

May import: ``webhooks.storage``, ``webhooks.messaging`` and the shared modules at the top
(``config``, ``logs``, ``metrics``, ``durations``, ``event_types``).
"""
