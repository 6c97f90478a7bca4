"""The dramatiq contender: an actor that POSTs a webhook; a non-2xx answer goes to dramatiq's ``Retries``
(exponential backoff from ``min_backoff``). ``BENCH_QUEUE`` and ``BENCH_AMQP_URL`` come from the environment: the
``dramatiq`` command imports this module in every worker process. Queues: ``Q``, ``Q.DQ`` (delays), ``Q.XQ``."""

from __future__ import annotations

import os

import dramatiq
import httpx
from dramatiq.brokers.rabbitmq import RabbitmqBroker

QUEUE = os.environ.get("BENCH_QUEUE", "bench_dramatiq")

broker = RabbitmqBroker(url=os.environ.get("BENCH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2F"))
dramatiq.set_broker(broker)

#: One pooled client per process, shared by the worker threads (httpx.Client is thread-safe).
client = httpx.Client(limits=httpx.Limits(max_connections=32, max_keepalive_connections=32), timeout=15.0,
                      trust_env=False)


@dramatiq.actor(queue_name=QUEUE, max_retries=9, min_backoff=5_000, max_backoff=86_400_000)
def deliver(url: str, body: str, webhook_id: str) -> None:
    """POST ``body`` to ``url``; a non-2xx answer or a network error is retried with backoff."""
    response = client.post(url, content=body.encode(), headers={"content-type": "application/json",
                                                                 "webhook-id": webhook_id})
    response.raise_for_status()
