"""Put ``N`` messages on a contender's queue before its workers start (``floor``: the harness declares the queue
first): ``python -m bench.peers.preload floor|dramatiq|celery --queue Q --url URL --count N``."""

from __future__ import annotations

import argparse
import os
import time

import pika

from bench.kit.payload import webhook_body


def floor(queue: str, url: str, count: int, amqp_url: str) -> None:
    connection = pika.BlockingConnection(pika.URLParameters(amqp_url))
    channel = connection.channel()
    # Confirmed one by one (16 s for 20,000, against 1 s unconfirmed): without confirms the
    # quorum queue once held 19,931 of 20,000 (2026-11-26 03:22 UTC) and the step waited
    # for the rest until its time was up.
    channel.confirm_delivery()
    body = webhook_body()
    for i in range(count):
        channel.basic_publish("", queue, body, pika.BasicProperties(
            delivery_mode=pika.DeliveryMode.Persistent, content_type="application/json",
            headers={"webhook-id": f"msg_{i}"}))
    connection.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["floor", "dramatiq", "celery"])
    parser.add_argument("--queue", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--amqp-url", default="amqp://guest:guest@127.0.0.1:5672/%2F")
    args = parser.parse_args()
    os.environ["BENCH_QUEUE"] = args.queue
    started = time.monotonic()
    body = webhook_body().decode()
    if args.kind == "floor":
        floor(args.queue, args.url, args.count, args.amqp_url)
    elif args.kind == "dramatiq":
        from bench.peers.dramatiq_app import deliver as dramatiq_deliver

        for i in range(args.count):
            dramatiq_deliver.send(args.url, body, f"msg_{i}")
    else:
        from bench.peers.celery_app import deliver as celery_deliver

        with celery_deliver.app.producer_or_acquire() as producer:
            for i in range(args.count):
                celery_deliver.apply_async((args.url, body, f"msg_{i}"), producer=producer)
    print(f"{time.monotonic() - started:.2f}")


if __name__ == "__main__":
    main()
