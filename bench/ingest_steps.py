"""The ingestion step of ``bench/run.py``: single events and batches of 100 through gunicorn, and its table.

Each half runs ``bench/ingest_load.py``'s ``measure()`` on a stack of its own (a fresh
PostgreSQL database and queue prefix, ``gunicorn -c python:webhooks.gunicorn_conf`` with
2 workers as the Procfile runs it, no delivery worker): one tenant, one endpoint, ~1 KB
events from ``bench/loadgen.py``. The figures are events answered 202 per second; the
background publishing of their deliveries runs meanwhile on the same cores, and how long
after the last answer it had published everything is reported beside them.
"""

from __future__ import annotations

from typing import Any, Callable

from bench import ingest_load
from bench.harness import CLEANUP, Deadline, log

#: Events per request of the batch half (the issue's target is stated for batches of 100).
BATCH = 100

#: Keep-alive connections per load process (2 processes): 4 in all, so that a client within the
#: API's limits (``TENANT_MAX_CONCURRENT_REQUESTS``, 4 per web process) is never refused.
CONNECTIONS = 2

#: Targets (events/s on this machine, 2 cores).
SINGLE_TARGET = 1_500
BATCH_TARGET = 20_000


def _half(batch: int, count: int, repeat: int, deadline: Deadline) -> dict[str, Any]:
    stack = ingest_load.Stack(endpoints=1, rate_limit=1_000_000.0)
    CLEANUP.add(f"ingestion stack {stack.prefix}", stack.close)
    try:
        keys = stack.start()
        deadline.check()
        result = ingest_load.measure(stack, keys, count=count, batch=batch, repeat=repeat, connections=CONNECTIONS,
                                     say=lambda line: log(f"   {line}"))
        result["check"] = ingest_load.check(stack)
        return result
    finally:
        stack.close()


def ingest(quick: bool, deadline: Deadline) -> dict[str, Any]:
    """Single events, then batches of ``BATCH``; each half on a fresh stack."""
    repeat = 1 if quick else 3
    single = _half(0, 2_000 if quick else 10_000, repeat, deadline)
    log(f"   single events: {single['rate_median']:,.0f} events/s (median of {repeat})")
    batch = _half(BATCH, 20_000 if quick else 100_000, repeat, deadline)
    log(f"   batches of {BATCH}: {batch['rate_median']:,.0f} events/s (median of {repeat})")
    return {"single": single, "batch": batch}


def render(r: dict[str, Any], add: Callable[[str], None]) -> None:
    """The ingestion section of the generated results (``bench/report.py`` calls it)."""
    from bench.report import _heading, _n, _verdict

    step = r.get("ingest")
    if step is None or not _heading(add, "Ingestion: single events and batches (`bench/ingest_steps.py`)", step):
        return
    add("gunicorn as the Procfile runs it (`-c python:webhooks.gunicorn_conf`, 2 workers), no delivery worker; "
        f"one tenant, one endpoint, ~1 KB events; `bench/loadgen.py` 2 processes × {CONNECTIONS} keep-alive connections "
        "(within the tenant's `TENANT_MAX_CONCURRENT_REQUESTS`). "
        "Rates are events answered `202` per second; each event's delivery is published (with confirms) and "
        "marked in the background on the same cores. CPU is per event, publishing included.")
    add("")
    add("| requests | events/s (median; min–max) | target | CPU ms per event: gunicorn / PostgreSQL / RabbitMQ / "
        "load generator / whole machine | everything published | checks |")
    add("|---|---|---|---|---|---|---|")
    for key, label, target in (("single", "`POST /v1/events`", SINGLE_TARGET),
                               ("batch", f"`POST /v1/events/batch`, {BATCH} events each", BATCH_TARGET)):
        half = step[key]
        cpu = half["runs"][len(half["runs"]) // 2]["cpu_ms_per_event"]
        lags = [run["published_after_s"] for run in half["runs"]]
        check = half["check"]
        add(f"| {label} | **{_n(half['rate_median'])}** ({_n(half['rate_min'])}–{_n(half['rate_max'])}) | "
            f"≥ {_n(target)}: {_verdict(half['rate_median'] >= target)} | "
            f"{cpu['gunicorn workers']:.2f} / {cpu['postgres backends']:.2f} / {cpu['rabbitmq']:.2f} / "
            f"{cpu['load generator']:.2f} / {cpu['whole machine']:.2f} | "
            f"{', '.join('not within 120 s' if lag is None else f'{lag:.1f} s' for lag in lags)} after the last 202 | "
            f"{check['events']:,} events, {check['deliveries']:,} deliveries, {check['unmarked']} unpublished, "
            f"{check['seq_gaps']} seq gaps |")
    add("")
