"""A message's receipt from the broker: the one handle that acks it, requeues it or moves it to another queue.

A delivery tag means something only on the session it came on (after a reconnect the
broker has requeued the message already), so the receipt carries both, as dramatiq's
message proxy carries its own tag. It settles the message once: a second ack, requeue
or move is a no-op, so whoever holds the receipt last may settle it without asking who
did before (an unexpected error gives back only what was not settled).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

log = logging.getLogger(__name__)

#: How long a publish may wait for the broker's confirm (seconds).
CONFIRM_TIMEOUT_SECONDS = 5.0


class BrokerSession(Protocol):
    """What a receipt needs of ``broker.Session``."""

    @property
    def is_open(self) -> bool: ...

    def ack(self, tag: int) -> None: ...

    def requeue(self, tag: int) -> None: ...

    async def publish(self, queue: str, body: bytes, headers: dict[str, Any], timeout: float) -> bool: ...


class Receipt:
    """One message taken from the broker, until it is acked, requeued or moved."""

    __slots__ = ("session", "tag", "settled")

    def __init__(self, session: BrokerSession, tag: int) -> None:
        self.session = session
        self.tag = tag
        #: Acked, requeued or moved (or its session is gone): nothing more to do with the broker.
        self.settled = False

    def _settle(self) -> bool:
        """Mark it settled; whether it was still the broker's to settle (its session open)."""
        if self.settled:
            return False
        self.settled = True
        return self.session.is_open

    def ack(self) -> None:
        """The message is done with (recorded, moved or stale)."""
        if self._settle():
            self.session.ack(self.tag)

    def requeue(self) -> None:
        """The message goes back to the queue (its tag died with its session otherwise)."""
        if self._settle():
            self.session.requeue(self.tag)

    async def move(self, queue: str, body: bytes, headers: dict[str, Any], pause: float) -> bool:
        """Publish the message to ``queue`` and ack it; if the broker does not confirm, the
        message returns to its queue after ``pause`` seconds (it exists nowhere else)."""
        if self.settled:
            return False
        if self.session.is_open and await self.session.publish(queue, body, headers, CONFIRM_TIMEOUT_SECONDS):
            self.ack()
            return True
        log.warning("publish to %s not confirmed; the message returns to the queue", queue)
        await asyncio.sleep(pause)
        self.requeue()
        return False
