"""What every part of a running engine shares, by what it talks to.

The engine builds one ``Runtime`` per process and hands it to the parts that handle
messages (``attempt``), move backlogs (``spill``) and keep things tidy (``upkeep``):
the lanes (memory), ``broker`` (``broker_link.BrokerLink``: the current session),
``db`` (``database_work.DatabaseWork``: the batchers and the database's threads),
``tasks`` (``tasks.TaskSet``), ``destinations`` (the way out to every kind of receiver), the loop and its ``lag``, and
``wake``, which asks the engine for a round of handing out work. Everything here runs
on the event loop.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Callable, Iterable

from webhooks.config import Settings
from webhooks.delivery.broker_link import BrokerLink
from webhooks.delivery.database_work import DatabaseWork
from webhooks.delivery.lag import LoopLag
from webhooks.delivery.lane import Held
from webhooks.delivery.lanes import Lanes
from webhooks.delivery.destinations import Destinations
from webhooks.delivery.tasks import TaskSet


@dataclass
class Runtime:
    settings: Settings
    lanes: Lanes
    destinations: Destinations
    broker: BrokerLink
    db: DatabaseWork
    tasks: TaskSet
    #: Set once a stop was asked for.
    stopping: asyncio.Event
    #: Schedules a round of handing out work (after anything that may free or add some).
    wake: Callable[[], None]
    #: The event loop's own delay (windows do not count it against receivers).
    lag: LoopLag = field(default_factory=LoopLag)
    #: The loop it was built in (read on every step of every delivery: kept, not looked up).
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)

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
            self.db.return_backlog(taken_back)
