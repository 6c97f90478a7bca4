"""Step ``tracing``: what OpenTelemetry tracing costs, off and with every trace sampled, interleaved (``ROUNDS``).

Each round on a fresh stack posts the same number of events with the workers stopped (ingestion rate, server
side), then measures the sustained delivery rate. "On" sends every process's spans over OTLP/HTTP to a sink
process that counts and discards them (``bench.kit.otlp_sink``). Issue 35's targets: off within the noise of
today's throughput; all sampled at most 15 % slower.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from bench.kit.markdown import Add, n, section_of
from bench.kit.procs import PROCS, PYTHON, Deadline, log
from bench.kit.services import free_port
from bench.kit.stack import running
from bench.kit.stats import WARMUP, mean_of_rounds, steady_rate
from bench.kit.step import Context, Results, Step, guarded

ROUNDS = ("off", "on") * 3


def _round(context: Context, index: int, mode: str, sink: str, deadline: Deadline) -> dict[str, Any]:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": sink, "OTEL_TRACES_SAMPLER": "always_on"} if mode == "on" else {}
    plan, receiver = context.plan, context.receiver
    with running(f"tracing-{index}-{mode}", env, remove=True) as stack:
        tenant = stack.tenant(f"tracing{index}")
        path = f"/tracing/{index}"
        stack.endpoint(tenant, receiver.url(path))
        ingest = stack.preload(tenant, plan.events, 1, deadline)
        run = stack.deliver(receiver, path, ingest["events"], plan.processes, deadline.left(), deadline)
        rate, seconds = steady_rate([row[0] for row in receiver.dump(path)], WARMUP)
    log(f"   tracing {mode} (round {index + 1}): ingest {ingest['rate']:,.0f} events/s, "
        f"delivery {rate:,.0f}/s sustained over {seconds:.1f} s, all arrived: {run.finished}")
    return {"mode": mode, "events": ingest["events"], "ingest_rate": ingest["rate"], "delivery_rate": rate,
            "steady_seconds": seconds, "complete": run.finished}


def tracing_cost(context: Context, deadline: Deadline) -> Results:
    port = free_port()
    sink = PROCS.start("tracing-otlp-sink", [PYTHON, "-m", "bench.kit.otlp_sink", str(port)])
    url = f"http://127.0.0.1:{port}"
    try:
        time.sleep(0.5)
        rounds = [guarded(f"tracing: round {index + 1}, {mode}",
                          lambda d, i=index, m=mode: _round(context, i, m, url, d), deadline.left() / (len(ROUNDS) - index))
                  for index, mode in enumerate(ROUNDS)]
        received = httpx.get(f"{url}/count", trust_env=False).json()
    finally:
        PROCS.stop(sink)
    log(f"   the sink took {received['requests']:,} exports, {received['bytes'] / 1e6:,.1f} MB")
    return {"rounds": rounds, "sink": received}


@section_of("tracing", "Tracing: off against every trace sampled")
def section(step: dict[str, Any], r: dict[str, Any], add: Add) -> None:
    rounds = step["rounds"]
    add("| round | tracing | events | ingestion (events/s) | delivery (deliveries/s) |")
    add("|---|---|---|---|---|")
    for index, one in enumerate(rounds):
        if one.get("status") == "ok":
            add(f"| {index + 1} | {one['mode']} | {n(one['events'])} | {n(one['ingest_rate'])} | {n(one['delivery_rate'])} |")
    for key, label in (("ingest_rate", "ingestion"), ("delivery_rate", "delivery")):
        off, on = mean_of_rounds(rounds, "off", key, "mode"), mean_of_rounds(rounds, "on", key, "mode")
        add("")
        add(f"{label}: off {n(off)}/s, on {n(on)}/s: {100 * (on - off) / off:+.1f} % with every trace sampled")
    add("")


STEP = Step("tracing", "tracing's cost: off and all sampled, interleaved", tracing_cost,
            lambda context: 4 * (180 + context.plan.events / 100), (section,), full_run=False)
