"""Delivery: from the primary queue to the receiver and back through the ladder.

The engine, one asyncio event loop per worker process: ``engine`` (the loop and its
broker sessions) -> ``lanes`` (each endpoint's ``lane`` of waiting messages, served round-robin by
tenant) with ``window`` (each endpoint's adaptive concurrency) -> ``attempt`` (claim,
sign, call the endpoint's ``destinations`` kind (HTTP: ``sender`` through ``guard``), judge with ``decide``, record, send on,
ack) -> ``batcher`` (database work in batches on threads). ``spill`` moves a backlog
beyond memory's bound to the database and back, ``upkeep`` keeps paces, windows and the
ceiling's share up to date, ``lag`` measures the loop's own delay, ``broker`` is the
awaitable pika session and ``runtime`` what they all share, by what it talks to:
``broker_link`` (the current session), ``database_work`` (the batchers and the
database's threads), ``tasks`` (every task under way). A message handed out holds a
``lane.Slot`` in its endpoint's window and a ``receipt`` (ack, requeue or move, once);
``pauses`` is every wait of the engine's own. Who writes each piece of this state:
``docs/architecture.md``.

What one attempt needs: ``claims`` (a lease on the delivery, one ladder per delivery),
``endpoint_view`` (the endpoint as the claim read it), ``signing`` and ``outgoing`` (the
signed Standard Webhooks request), ``netguard`` (which addresses a customer URL may
reach), ``http_result`` and ``classify`` (what the answer means), ``records`` (the
attempt row and the delivery's new state), ``backlog`` (deliveries spilled to the
database) and ``sweeper`` (deliveries whose message was lost, published again).

May import: ``webhooks.storage``, ``webhooks.messaging``, ``webhooks.catalog`` (email
templates), ``webhooks.ingest``, ``webhooks.health`` and the shared modules at the top.
"""
