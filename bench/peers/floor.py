"""The floor: a minimal pika consumer that POSTs each message with httpx and acks: no database, no signing, no
retry, the least any Python worker on this broker must do per message. ``--threads`` delivery threads POST and
hand the ack back to the connection's thread (``add_callback_threadsafe``), the shape of dramatiq's worker and
of the service's. ``python -m bench.peers.floor --queue Q --url URL [--threads 8]``
"""

from __future__ import annotations

import argparse
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import httpx
import pika


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queue", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--amqp-url", default="amqp://guest:guest@127.0.0.1:5672/%2F")
    args = parser.parse_args()

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    client = httpx.Client(limits=httpx.Limits(max_connections=args.threads * 2, max_keepalive_connections=args.threads * 2),
                          timeout=15.0, trust_env=False)
    pool = ThreadPoolExecutor(args.threads)
    connection = pika.BlockingConnection(pika.URLParameters(args.amqp_url))
    channel = connection.channel()
    channel.basic_qos(prefetch_count=args.threads)

    def settle(tag: int, ok: bool) -> None:
        if ok:
            channel.basic_ack(tag)
        else:
            channel.basic_nack(tag, requeue=True)

    def work(tag: int, body: bytes, headers: dict[str, Any]) -> None:
        try:
            response = client.post(args.url, content=body, headers={"content-type": "application/json", **headers})
            ok = response.is_success
        except httpx.HTTPError:
            ok = False
        connection.add_callback_threadsafe(partial(settle, tag, ok))

    def on_message(_channel: Any, method: Any, properties: pika.BasicProperties, body: bytes) -> None:
        headers = {"webhook-id": str((properties.headers or {}).get("webhook-id", ""))}
        pool.submit(work, method.delivery_tag, body, headers)

    channel.basic_consume(args.queue, on_message)
    while not stop.is_set():
        connection.process_data_events(time_limit=0.2)
    pool.shutdown(wait=True)
    connection.process_data_events(time_limit=0)
    connection.close()


if __name__ == "__main__":
    main()
