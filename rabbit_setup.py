"""Declare the RabbitMQ exchange and every queue of the current ladder (idempotent).

Usage: ``python rabbit_setup.py`` (reads ``AMQP_URL``, ``QUEUE_PREFIX``, ``RETRY_LADDER``).
"""

from __future__ import annotations

import sys

import pika.exceptions

from webhooks.messaging.brokers import connect, explain
from webhooks.config import Settings


def main() -> int:
    try:
        settings = Settings.from_env()
    except ValueError as error:  # a bad AMQP_URL or RETRY_LADDER: say which, without a traceback
        print(f"rabbit_setup.py: {error}", file=sys.stderr)
        return 2
    topology = settings.topology
    try:
        connection = connect(settings.amqp_url, timeout=5.0)
    except (pika.exceptions.AMQPError, OSError) as error:  # one line saying where and what to do, no traceback
        print(f"rabbit_setup.py: {explain(error, settings.amqp_url)}", file=sys.stderr)
        return 1
    try:
        topology.declare(connection.channel())
    finally:
        connection.close()
    print(f"declared exchange {topology.exchange} and queues: {', '.join(topology.all_queues())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
