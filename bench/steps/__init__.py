"""Every step of ``bench/run.py``, in the order a full run runs them (see ``bench/README.md`` to add one).

A step module measures one thing and says how its figures read: it defines ``STEP`` (a
``bench.kit.step.Step``; ``slow`` defines four) and may import only ``bench.kit``, ``webhooks``,
``tests``' helpers and third-party packages, never another step, the report or an entry point.
"""

from __future__ import annotations

from bench.kit.step import Step
from bench.steps import backlog, catalog, core, destinations, flood, hot_path_sql, ingest, ladder, noisy, peers
from bench.steps import portal, receiver, retention, sender_cpu, service, slow, tracing, web

#: Every step, in the order a run runs them; those with ``full_run=False`` only when ``--only`` names them.
STEPS: tuple[Step, ...] = (
    receiver.STEP, peers.STEP, service.STEP, ingest.STEP, web.SLOW_CLIENTS, web.ADMISSION, noisy.STEP, ladder.STEP,
    backlog.STEP, slow.FANOUT, slow.SLOW, slow.CLIMB, flood.STEP, flood.FANOUT, slow.INFLIGHT,
    core.STEP, retention.STEP, hot_path_sql.STEP, sender_cpu.STEP, tracing.STEP, catalog.STEP,
    portal.STEP, destinations.STEP,
)

#: The steps by name.
BY_NAME: dict[str, Step] = {step.name: step for step in STEPS}
