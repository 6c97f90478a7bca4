"""Every step of ``bench/run.py`` (``bench/README.md``: what each is, and how to add one; a step module never
imports another step, the report or an entry point)."""

from __future__ import annotations

from bench.kit.step import Step
from bench.steps import backlog, catalog, core, destinations, flood, ingest, ladder, noisy, peers, portal, receiver
from bench.steps import retention, service, slow, tracing, web

#: Every step, in the order a run runs them; those with ``full_run=False`` only when ``--only`` names them.
STEPS: tuple[Step, ...] = (
    receiver.STEP, peers.STEP, service.STEP, ingest.STEP, web.SLOW_CLIENTS, web.ADMISSION, noisy.STEP, ladder.STEP,
    backlog.STEP, slow.FANOUT, slow.SLOW, slow.CLIMB, flood.STEP, flood.FANOUT, slow.INFLIGHT,
    core.STEP, retention.STEP, tracing.STEP, catalog.STEP, portal.STEP, destinations.STEP,
)
