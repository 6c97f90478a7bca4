"""One ``send`` for every AMQP frame waiting to go out, instead of one ``send`` per frame.

pika's non-blocking transports (``SelectConnection`` in the web's publisher,
``AsyncioConnection`` in the worker) buffer each frame as a chunk of its own and, once
the socket is writable, send the chunks one ``send`` call at a time. A worker acks every
delivery of a recorded batch together, so a batch of 128 became 128 system calls and 128
TCP segments of 21 bytes, each woken up, read and parsed on its own by the broker. Joining
the chunks first sends them as one write; the broker reads them in one go. Measured on the
throughput step (``bench/RESULTS-archive.md``, 2026-11-26 03:52–07:08 UTC, commit 17b94a9): RabbitMQ's CPU per delivery
halved (0.032 to 0.016 ms) and the service delivered 7-11 % more per second.

The bytes and their order are unchanged; a partial send leaves the rest buffered, as before.
``install`` patches pika's ``_AsyncTransportBase._produce`` (pika is pinned in
``requirements.txt``; ``tests/messaging/test_frame_writes.py`` checks the private names it
relies on) and is idempotent.
"""

from __future__ import annotations

from typing import Any, Callable

from pika.adapters.utils import io_services_utils

_TRANSPORT = io_services_utils._AsyncTransportBase


def _coalescing(produce: Callable[[Any], None]) -> Callable[[Any], None]:
    def _produce(self: Any) -> None:
        buffers = self._tx_buffers
        if len(buffers) > 1:
            joined = b"".join(buffers)
            buffers.clear()
            buffers.append(joined)
        produce(self)

    _produce.coalescing = True  # type: ignore[attr-defined]
    return _produce


def install() -> None:
    """Make every pika transport of this process send its buffered frames in one write."""
    if not getattr(_TRANSPORT._produce, "coalescing", False):
        _TRANSPORT._produce = _coalescing(_TRANSPORT._produce)  # type: ignore[method-assign]
