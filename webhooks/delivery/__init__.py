"""The delivery engine: one asyncio event loop per worker process, from the primary queue to the receiver.

``engine`` (the process's loop and broker sessions) -> ``lanes`` (an endpoint's waiting
messages, served round-robin by tenant) with ``window`` (each endpoint's adaptive
concurrency) -> ``attempt`` (claim, sign, call with ``sender`` through ``guard``, judge
with ``decide``, record, send on, ack) -> ``batcher`` (database work in batches on
threads). ``spill`` moves a backlog beyond memory's bound to the database and back,
``upkeep`` keeps paces, windows and the ceiling's share up to date, ``broker`` is the
awaitable pika session and ``runtime`` what they all share.

May import the storage, rules and cross-cutting modules of ``webhooks``; nothing in
``webhooks`` outside the worker entry point imports from here.
"""
