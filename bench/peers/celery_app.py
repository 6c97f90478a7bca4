"""The Celery contender: a task that POSTs a webhook with ``autoretry_for`` and backoff.

Configured from the environment (``BENCH_QUEUE``, ``BENCH_AMQP_URL``). RabbitMQ through
the ``amqp`` transport (py-amqp), no result backend (``task_ignore_result``), late acks
(``task_acks_late``: acked after the POST, like the floor and the service), no events,
gossip, mingle or remote control, so only the task queue is declared: ``Q`` (Celery's
default queue type, classic, durable) bound to a direct exchange of the same name. The ``peers`` step
runs ``celery -A bench.peers.celery_app worker --pool threads``.
"""

from __future__ import annotations

import os

import httpx
from celery import Celery
from kombu import Exchange, Queue

QUEUE = os.environ.get("BENCH_QUEUE", "bench_celery")

app = Celery("bench", broker=os.environ.get("BENCH_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//"))
app.conf.update(
    task_ignore_result=True,
    result_backend=None,
    task_acks_late=True,
    task_queues=[Queue(QUEUE, Exchange(QUEUE, type="direct"), routing_key=QUEUE)],
    task_default_queue=QUEUE,
    task_default_exchange=QUEUE,
    task_default_routing_key=QUEUE,
    worker_enable_remote_control=False,
    worker_send_task_events=False,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)

#: One pooled client per process, shared by the pool's threads (httpx.Client is thread-safe).
client = httpx.Client(limits=httpx.Limits(max_connections=32, max_keepalive_connections=32), timeout=15.0,
                      trust_env=False)


@app.task(name="bench.deliver", autoretry_for=(httpx.HTTPError,), retry_backoff=5, retry_backoff_max=86_400,
          retry_jitter=False, max_retries=9)
def deliver(url: str, body: str, webhook_id: str) -> None:
    """POST ``body`` to ``url``; a non-2xx answer or a network error is retried with backoff."""
    response = client.post(url, content=body.encode(), headers={"content-type": "application/json",
                                                                 "webhook-id": webhook_id})
    response.raise_for_status()
