"""The engine's side of the database: the delivery path's batchers, one-off work on threads of its own,
and waiting out an outage.

Nothing here runs on the event loop but the waiting: the batchers (``batcher``) run claims,
records and outbox marks in batches on threads, ``run`` runs anything else (backlog moves,
housekeeping) on threads of its own, so neither holds up the other.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, TypeVar

import peewee

from webhooks import errors
from webhooks.delivery import backlog
from webhooks.delivery.batcher import Batcher, database_work
from webhooks.delivery.claims import Claim
from webhooks.delivery.pauses import Backoff
from webhooks.delivery.records import Outcome
from webhooks.delivery.tasks import TaskSet
from webhooks.messaging.messages import DeliveryMessage

log = logging.getLogger(__name__)

R = TypeVar("R")

#: A database failure is logged at most this often (seconds): every delivery waiting on it retries.
DATABASE_WARNING_EVERY_SECONDS = 1.0


class Stopping(errors.Stopping):
    """The worker is stopping while waiting for the database: give the message back."""


@dataclass
class DatabaseWork:
    executor: ThreadPoolExecutor
    claims: Batcher[DeliveryMessage, Claim]
    records: Batcher[tuple[DeliveryMessage, Outcome], bool]
    #: Outbox marks: the next attempt's message was confirmed.
    marks: Batcher[DeliveryMessage, None]
    stopping: asyncio.Event
    tasks: TaskSet
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)
    _warned_at: float = -DATABASE_WARNING_EVERY_SECONDS

    async def run(self, fn: Callable[..., R], *args: Any) -> R:
        """``fn(*args)`` on a database thread off the delivery path (one unit of work, not batched:
        backlog moves, housekeeping); the batches have threads of their own."""
        return await self.loop.run_in_executor(self.executor, database_work, fn, *args)

    async def until_up(self, batcher: Callable[[Any], Awaitable[R]], item: Any) -> R:
        """``await batcher(item)``, waiting out a database outage (the message stays unacked meanwhile);
        ``Stopping`` if the worker stops meanwhile."""
        backoff = Backoff()
        while True:
            try:
                return await batcher(item)
            except (peewee.OperationalError, peewee.InterfaceError) as error:
                if self.stopping.is_set():
                    raise Stopping from error
                self._warn(error, backoff.seconds)
                await backoff.wait(self.stopping)

    def return_backlog(self, messages: list[DeliveryMessage]) -> None:
        """Deliveries taken back from their backlog and not attempted: any worker may take them again."""
        self.tasks.spawn(self._return_backlog(messages))

    async def _return_backlog(self, messages: list[DeliveryMessage]) -> None:
        try:
            await self.run(backlog.give_back, messages)
        except Exception:  # noqa: BLE001 - the database may be down: the hold runs out instead
            log.warning("could not give back %d deliveries taken from the database; other workers take them "
                        "after %.0f s", len(messages), backlog.TAKE_HOLD_SECONDS, exc_info=True)

    def _warn(self, error: Exception, backoff: float) -> None:
        """Say once a second at most that the database failed (every waiting delivery retries)."""
        now = time.monotonic()
        if now - self._warned_at >= DATABASE_WARNING_EVERY_SECONDS:
            self._warned_at = now
            first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
            log.warning("database unavailable or conflicting (%s); retrying in %.1fs", first_line, backoff)
