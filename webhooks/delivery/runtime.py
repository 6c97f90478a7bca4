"""What every part of a running engine shares: settings, lanes, the broker session, the batchers.

The engine builds one ``Runtime`` per process and hands it to the parts that handle
messages (``attempt``), move backlogs (``spill``) and keep things tidy (``upkeep``).
Everything here runs on the event loop; database work goes through the batchers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable, TypeVar

import peewee

from webhooks.delivery.claims import Claim
from webhooks.config import Settings
from webhooks.delivery.batcher import Batcher, database_work
from webhooks.delivery.broker import Session
from webhooks.delivery.lag import LoopLag
from webhooks.delivery import backlog
from webhooks.delivery.lanes import Held, Lanes
from webhooks.delivery.pauses import Backoff
from webhooks.delivery.receipt import CONFIRM_TIMEOUT_SECONDS, Receipt
from webhooks.delivery.sender import Sender
from webhooks.messaging.messages import DeliveryMessage
from webhooks.delivery.records import Outcome

log = logging.getLogger(__name__)

R = TypeVar("R")

#: A database failure is logged at most this often (seconds): every delivery waiting on it retries.
DATABASE_WARNING_EVERY_SECONDS = 1.0

#: A message whose onward publish failed returns to the queue after this pause (seconds),
#: so a broker refusing publishes does not spin it into the dead-letter queue at once.
REQUEUE_PAUSE_SECONDS = 1.0


class Stopping(Exception):
    """The worker is stopping while waiting for the database: give the message back."""


@dataclass
class Runtime:
    settings: Settings
    lanes: Lanes
    sender: Sender
    executor: ThreadPoolExecutor
    claims: Batcher[DeliveryMessage, Claim]
    records: Batcher[tuple[DeliveryMessage, Outcome], bool]
    #: Outbox marks: the next attempt's message was confirmed.
    marks: Batcher[DeliveryMessage, None]
    #: Set once a stop was asked for.
    stopping: asyncio.Event
    #: Schedules a round of handing out work (after anything that may free or add some).
    wake: Callable[[], None]
    session: Session | None = None
    #: The event loop's own delay (windows do not count it against receivers).
    lag: LoopLag = field(default_factory=LoopLag)
    requeue_pause: float = REQUEUE_PAUSE_SECONDS
    #: Attempts running now (each owns one Held until it is settled).
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    #: The loop it was built in (read on every step of every delivery: kept, not looked up).
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)
    _warned_at: float = -DATABASE_WARNING_EVERY_SECONDS

    def spawn(self, coroutine: Awaitable[Any]) -> asyncio.Task[Any]:
        """Run ``coroutine`` as a tracked task (the engine waits for these before it exits)."""
        task = asyncio.ensure_future(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("unexpected error in the worker", exc_info=task.exception())

    async def in_db(self, fn: Callable[..., R], *args: Any) -> R:
        """``fn(*args)`` on a database thread off the delivery path (one unit of work, not batched:
        backlog moves, housekeeping); the batches have threads of their own."""
        return await self.loop.run_in_executor(self.executor, database_work, fn, *args)

    async def publish(self, queue: str, body: bytes, headers: dict[str, Any]) -> bool:
        """Publish on the current session; False when there is none or the broker did not confirm."""
        session = self.session
        if session is None:
            return False
        return await session.publish(queue, body, headers, CONFIRM_TIMEOUT_SECONDS)

    def give_back(self, held: Iterable[Held]) -> None:
        """Messages taken and not attempted go back where they came from: to the broker's queue, or
        (taken back from an endpoint's backlog) to the database, for any worker to take."""
        taken_back = []
        for one in held:
            if one.receipt is None:
                taken_back.append(one.message)
            else:
                one.receipt.requeue()
        if taken_back:
            self.return_to_database(taken_back)

    def return_to_database(self, messages: list[DeliveryMessage]) -> None:
        """Deliveries taken back from their backlog and not attempted: any worker may take them again."""
        self.spawn(self._return_to_database(messages))

    async def _return_to_database(self, messages: list[DeliveryMessage]) -> None:
        try:
            await self.in_db(backlog.give_back, messages)
        except Exception:  # noqa: BLE001 - the database may be down: the hold runs out instead
            log.warning("could not give back %d deliveries taken from the database; other workers take them "
                        "after %.0f s", len(messages), backlog.TAKE_HOLD_SECONDS, exc_info=True)

    async def move(self, receipt: Receipt | None, queue: str, body: bytes, headers: dict[str, Any]) -> bool:
        """Publish the message to ``queue`` and ack it (``Receipt.move``: requeued after ``requeue_pause``
        if the broker does not confirm); one taken back from the database (no receipt) is only published."""
        if receipt is None:
            return await self.publish(queue, body, headers)
        return await receipt.move(queue, body, headers, self.requeue_pause)

    async def until_db(self, batcher: Callable[[Any], Awaitable[R]], item: Any) -> R:
        """``await batcher(item)``, waiting out a database outage (the message stays unacked meanwhile)."""
        backoff = Backoff()
        while True:
            try:
                return await batcher(item)
            except (peewee.OperationalError, peewee.InterfaceError) as error:
                if self.stopping.is_set():
                    raise Stopping from error
                self._warn_database(error, backoff.seconds)
                await backoff.wait(self.stopping)

    def _warn_database(self, error: Exception, backoff: float) -> None:
        """Say once a second at most that the database failed (every waiting delivery retries)."""
        now = time.monotonic()
        if now - self._warned_at >= DATABASE_WARNING_EVERY_SECONDS:
            self._warned_at = now
            first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
            log.warning("database unavailable or conflicting (%s); retrying in %.1fs", first_line, backoff)
