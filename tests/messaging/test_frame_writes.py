"""pika's transports send every frame waiting to go out in one write, bytes and order unchanged."""

from __future__ import annotations

import collections

from pika.adapters.utils.io_services_utils import _AsyncPlaintextTransport, _AsyncTransportBase

from webhooks.messaging import frame_writes


class RecordingSocket:
    """Takes at most ``limit`` bytes per ``send`` and remembers each call."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.sends: list[bytes] = []

    def send(self, data: bytes) -> int:
        taken = bytes(data[: self.limit]) if self.limit is not None else bytes(data)
        self.sends.append(taken)
        return len(taken)


def transport_with(frames: list[bytes], sock: RecordingSocket) -> _AsyncPlaintextTransport:
    """A transport in the state ``_buffer_tx_data`` leaves it in, around ``sock``."""
    transport = object.__new__(_AsyncPlaintextTransport)
    transport._tx_buffers = collections.deque(frames)
    transport._tx_buffered_byte_count = sum(map(len, frames))
    transport._sock = sock
    return transport


def test_the_worker_and_the_web_publisher_install_it() -> None:
    import webhooks.delivery.broker  # noqa: F401 - the worker's session
    import webhooks.messaging.publisher  # noqa: F401 - the web's and the clock's publisher

    assert getattr(_AsyncTransportBase._produce, "coalescing", False)


def test_installing_twice_wraps_once() -> None:
    frame_writes.install()
    produce = _AsyncTransportBase._produce
    frame_writes.install()
    assert _AsyncTransportBase._produce is produce


def test_many_buffered_frames_go_out_in_one_send() -> None:
    frame_writes.install()
    acks = [bytes([1, 0, 1]) + index.to_bytes(8, "big") + b"\xce" for index in range(128)]
    sock = RecordingSocket()
    transport = transport_with(acks, sock)

    transport._produce()

    assert sock.sends == [b"".join(acks)]
    assert not transport._tx_buffers
    assert transport._tx_buffered_byte_count == 0


def test_a_partial_send_leaves_the_rest_buffered_in_order() -> None:
    frame_writes.install()
    frames = [b"first-frame", b"second-frame", b"third-frame"]
    sock = RecordingSocket(limit=15)

    transport = transport_with(list(frames), sock)
    while transport._tx_buffers:  # as pika does on each writable event
        transport._produce()

    assert b"".join(sock.sends) == b"".join(frames)
    assert all(len(sent) <= 15 for sent in sock.sends)
    assert transport._tx_buffered_byte_count == 0
