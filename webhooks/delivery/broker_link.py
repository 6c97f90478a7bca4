"""The engine's side of the broker: the current session, and publishing on it.

The engine replaces ``session`` on every reconnect; a message's own ``Receipt`` keeps the
session it came on, so it never acks on the wrong one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from webhooks.delivery.broker import Session
from webhooks.delivery.receipt import CONFIRM_TIMEOUT_SECONDS, Receipt

#: A message whose onward publish failed returns to the queue after this pause (seconds),
#: so a broker refusing publishes does not spin it into the dead-letter queue at once.
REQUEUE_PAUSE_SECONDS = 1.0


@dataclass
class BrokerLink:
    #: The session consuming now (None between sessions).
    session: Session | None = None
    requeue_pause: float = REQUEUE_PAUSE_SECONDS

    async def publish(self, queue: str, body: bytes, headers: dict[str, Any]) -> bool:
        """Publish on the current session; False when there is none or the broker did not confirm."""
        session = self.session
        if session is None:
            return False
        return await session.publish(queue, body, headers, CONFIRM_TIMEOUT_SECONDS)

    async def move(self, receipt: Receipt | None, queue: str, body: bytes, headers: dict[str, Any]) -> bool:
        """Publish the message to ``queue`` and ack it (``Receipt.move``: requeued after ``requeue_pause``
        if the broker does not confirm); one taken back from the database (no receipt) is only published."""
        if receipt is None:
            return await self.publish(queue, body, headers)
        return await receipt.move(queue, body, headers, self.requeue_pause)
