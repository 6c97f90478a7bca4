"""Declare the RabbitMQ exchange and every queue of the current ladder (idempotent).

Usage: ``python rabbit_setup.py`` (reads ``AMQP_URL``, ``QUEUE_PREFIX``, ``RETRY_LADDER``).
"""

from __future__ import annotations

import sys

import pika

from webhooks.config import Settings
from webhooks.publisher import connection_parameters


def main() -> int:
    settings = Settings.from_env()
    topology = settings.topology
    connection = pika.BlockingConnection(connection_parameters(settings.amqp_url, timeout=5.0))
    try:
        topology.declare(connection.channel())
    finally:
        connection.close()
    print(f"declared exchange {topology.exchange} and queues: {', '.join(topology.all_queues())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
