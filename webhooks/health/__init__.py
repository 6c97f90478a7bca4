"""Endpoint health: whether an endpoint is there, what waits for it, and who is told.

``presence`` (the circuit breaker every worker shares: online, offline, recovering),
``probes`` (an offline endpoint tried again at a bounded interval, or at once on request),
``recovery`` and ``releaser`` (what the clock does for endpoints that were away: release
parked deliveries in order and paced, give up), ``operational`` (alerts become
the service's own ``endpoint.*`` events, stored through ingest), ``alert_digest``,
``alert_emails`` and ``mailer`` (the emails, with what waits for the endpoint).

May import: ``webhooks.storage``, ``webhooks.messaging``, ``webhooks.ingest`` and the
shared modules at the top.
"""
