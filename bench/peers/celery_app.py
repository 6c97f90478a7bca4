"""The Celery contender: a task that POSTs a webhook, ``autoretry_for`` with backoff; ``BENCH_QUEUE`` and
``BENCH_AMQP_URL`` from the environment. py-amqp transport, no result backend, late acks (after the POST, like
the floor and the service), no events, gossip, mingle or remote control: only the task queue is declared
(classic, durable, bound to a direct exchange of its name)."""

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
