"""Messaging: RabbitMQ, the messages on it, and the way there that loses nothing.

``brokers`` (which node of ``AMQP_URL`` to connect to), ``ladder`` and ``topology`` (the
backoff tiers and the queues and exchanges they become), ``messages`` (the body and
headers of one delivery's message), ``publisher`` (persistent, confirmed publishing,
fork-safe), ``outbox`` (publish what was committed, mark it, relay what was missed) and
``enqueuer`` (the web process's background publishing after the response).

May import: ``webhooks.storage`` and the shared helpers ``durations`` and ``logs``.
"""
