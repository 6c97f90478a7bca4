"""Step ``receiver``: what the benchmark's receiver answers per second, so that no figure is its limit."""

from __future__ import annotations

from typing import Any

from bench.kit.markdown import Add, n, ok, section_of, service_rate
from bench.kit.payload import webhook_body
from bench.kit.procs import Deadline, log
from bench.kit.step import Context, Results, Step
from bench.kit.wrk import lua_post_script, run_wrk, wrk_version


def capacity(context: Context, deadline: Deadline) -> Results:
    """What the receiver answers per second under wrk (1 thread, 32 keep-alive connections)."""
    receiver, plan = context.receiver, context.plan
    script = lua_post_script(webhook_body(), {"Content-Type": "application/json", "webhook-id": "msg_capacity"})
    result = run_wrk(receiver.url("/capacity"), script, threads=1, connections=32, duration=plan.receiver_seconds)
    receiver.reset()
    log(f"   receiver: {result.rps:,.0f} requests/s (p99 {result.p99_ms} ms)")
    return {"rps": result.rps, "requests": result.requests, "seconds": result.seconds, "p50_ms": result.p50_ms,
            "p99_ms": result.p99_ms, "non_2xx": result.non_2xx, "tool": f"wrk {wrk_version()}",
            "threads": 1, "connections": 32}


@section_of("receiver", "Receiver capacity")
def section(step: dict[str, Any], r: dict[str, Any], add: Add) -> None:
    fastest = max([p["rate"] for p in r.get("peers", {}).values() if isinstance(p, dict) and ok(p) and "rate" in p]
                  + ([service_rate(r)] if service_rate(r) else []) or [float("nan")])
    add(f"`bench/kit/receiver.py` (one process, asyncio) under {step['tool']}, {step['threads']} thread, "
        f"{step['connections']} keep-alive connections, 1 KB POSTs for {step['seconds']:.0f} s: "
        f"**{n(step['rps'])} requests/s** (p50 {n(step['p50_ms'], 2)} ms, p99 {n(step['p99_ms'], 2)} ms), "
        f"{step['rps'] / fastest:.0f} × the fastest contender: not the bottleneck." if fastest == fastest else
        f"**{n(step['rps'])} requests/s**.")
    add("")


STEP = Step("receiver", "receiver capacity", capacity, lambda context: 60, (section,))
