"""Step ``backlog``: deliveries for an endpoint that is down park; it comes back; how fast and in what
order the backlog drains, and whether the worker's memory stays flat meanwhile."""

from __future__ import annotations

import time
from typing import Any

from bench.kit.markdown import Add, n, section_of
from bench.kit.procs import Deadline, RssSampler, ScenarioTimeout, log
from bench.kit.receiver_process import Receiver
from bench.kit.stack import running
from bench.kit.stats import WARMUP, steady_rate
from bench.kit.step import Context, Results, Step

#: The backlog drain counts as stalled when nothing is delivered for this long (seconds).
STALL_SECONDS = 60.0


def backlog(context: Context, deadline: Deadline) -> Results:
    """Deliveries queued for an endpoint that is down; it comes back; time the drain, watch RSS."""
    plan = context.plan
    # A ladder of 2 s steps, long enough for the whole outage: the probe that notices the endpoint
    # is back fires within 2 s, and no delivery runs out of attempts meanwhile.
    steps = max(600, int(plan.backlog_timeout))
    env = {"RETRY_LADDER": ",".join(["2s"] * steps), "RELEASE_RATE": f"{plan.release_rate:g}"}
    down = Receiver("receiver-backlog")
    result: dict[str, Any] = {"backlog": plan.backlog, "release_rate": plan.release_rate,
                              "ladder": f"2s x {steps}", "timeout": plan.backlog_timeout,
                              "service_overrides": {**env, "RETRY_LADDER": f"2s x {steps}"}}
    try:
        with running("backlog", env) as stack:
            tenant = stack.tenant("backlog")
            path = "/backlog"
            endpoint = stack.endpoint(tenant, down.url(path))  # nothing listens there yet
            workers = stack.start_workers(plan.processes)
            time.sleep(2.0)
            progress: list[tuple[float, int]] = []
            with RssSampler(workers, 1.0) as rss:
                t_ingest = time.time()
                ingest = stack.ingest(tenant, plan.backlog, Deadline(min(deadline.left(), plan.backlog / 20 + 120),
                                                                     "backlog ingestion"))
                total = ingest["events"]
                result["ingest"] = ingest
                log(f"   {total} events accepted at {ingest['rate']:,.0f}/s while the endpoint is down")
                Deadline(min(deadline.left(), 120 + total / 50), "parking the backlog").wait(
                    lambda: stack.queued() == 0 and stack.status_counts(endpoint).get("pending", 0) <= 1, 1.0,
                    stack.check_alive)
                result["before_return"] = counts = stack.status_counts(endpoint)
                result["parking_seconds"] = time.time() - t_ingest
                rss_parked = len(rss.samples)
                log(f"   endpoint down: {counts}; bringing the receiver back")
                t_back = time.time()
                down.start()
                drain = Deadline(min(deadline.left(), plan.backlog_timeout), "backlog drain")
                delivered, last_change = 0, time.monotonic()
                result["finished"] = False
                try:
                    while delivered < total:
                        now_delivered = stack.sql.value(
                            "SELECT count(*) FROM delivery WHERE endpoint_id = %s AND status = 'delivered'", (endpoint,))
                        if now_delivered != delivered:
                            delivered, last_change = now_delivered, time.monotonic()
                        elif time.monotonic() - last_change > STALL_SECONDS:
                            result["stalled"] = True
                            log(f"   no delivery for {STALL_SECONDS:.0f} s: stalled at {delivered}/{total}")
                            break
                        progress.append((time.time() - t_back, delivered))
                        if len(progress) % 30 == 0:
                            log(f"   drained {delivered}/{total} in {progress[-1][0]:.0f} s")
                        drain.check()
                        stack.check_alive()
                        time.sleep(1.0)
                    else:
                        result["finished"] = True
                except ScenarioTimeout:
                    pass
                result["final_statuses"] = stack.status_counts(endpoint)
            arrivals = sorted(t for t, _, _ in down.dump(path))
            unique = len({w for _, w, _ in down.dump(path)})
            rate_total = delivered / (arrivals[-1] - t_back) if arrivals else 0.0
            rate, _ = steady_rate(arrivals, WARMUP)
            largest = rss.largest_process_mib()
            result.update({
                "delivered": delivered, "received": len(arrivals), "received_unique": unique,
                "first_arrival_after_return_s": arrivals[0] - t_back if arrivals else None,
                "drain_seconds": (arrivals[-1] - t_back) if arrivals else None,
                "drain_rate": rate_total, "drain_rate_steady": rate,
                "projected_seconds": total / rate_total if rate_total else None,
                "memory": {"start_mib": largest[0], "peak_mib": max(largest), "end_mib": largest[-1],
                           "at_return_mib": largest[rss_parked - 1] if rss_parked else None,
                           "peak_while_parking_mib": max(largest[:rss_parked]) if rss_parked else None,
                           "peak_while_draining_mib": max(largest[rss_parked:]) if len(largest) > rss_parked else None,
                           "samples": len(largest)},
                "rss_series_mib": [round(x, 1) for x in largest],
                "progress": progress[:: max(1, len(progress) // 50)],
            })
            log(f"   backlog: {delivered}/{total} delivered at {rate_total:,.1f}/s; worker RSS "
                f"{largest[0]:.0f} -> peak {max(largest):.0f} -> {largest[-1]:.0f} MiB")
            return result
    finally:
        down.stop()


def memory_stayed_flat(mem: dict[str, Any]) -> bool:
    """Did the largest worker's RSS stay within 10 % (and 16 MiB) of its RSS once started and idle?"""
    base = mem["start_mib"]
    return mem["peak_mib"] - base <= max(16.0, 0.10 * base)


@section_of("backlog", "Backlog")
def section(step: dict[str, Any], r: dict[str, Any], add: Add) -> None:
    mem = step["memory"]
    before = ", ".join(f"{k} {v}" for k, v in sorted(step.get("before_return", {}).items()))
    add(f"{step['ingest']['events']:,} events accepted (at {n(step['ingest']['rate'])}/s, workers running) for an "
        f"endpoint whose receiver is down; the service takes it offline and parks them ({before}; "
        f"{step['parking_seconds']:.0f} s). Then the receiver comes back. `RELEASE_RATE={step['release_rate']:g}`"
        f"{' (the service default)' if step['release_rate'] == 20 else ''}; ladder {step['ladder']} so that the "
        "probe notices the return within 2 s and nothing runs out of attempts during the outage.")
    add("")
    add("| figure | value |")
    add("|---|---|")
    add(f"| first delivery after the receiver is back | {n(step['first_arrival_after_return_s'], 1)} s |")
    status = "all delivered" if step.get("finished") else f"**not finished within {step['timeout']:.0f} s**"
    add(f"| delivered | {step['delivered']:,} of {step['ingest']['events']:,} ({status}; receiver saw "
        f"{step['received']:,} requests, {step['received_unique']:,} distinct `webhook-id`s) |")
    add(f"| drain time, receiver back → last arrival | {n(step['drain_seconds'], 0)} s |")
    add(f"| drain rate | **{n(step['drain_rate'], 1)} deliveries/s** (after the first 10%: "
        f"{n(step['drain_rate_steady'], 1)}/s)"
        f"{'' if step.get('finished') else '; all of them would take about ' + n((step['projected_seconds'] or 0) / 60, 0) + ' min'} |")
    add(f"| worker RSS, largest process, every second ({mem['samples']} samples) | start {mem['start_mib']:.0f} MiB → "
        f"peak while parking {n(mem['peak_while_parking_mib'])} → at return {n(mem['at_return_mib'])} → peak while "
        f"draining {n(mem['peak_while_draining_mib'])} → end {mem['end_mib']:.0f} MiB (peak {mem['peak_mib']:.0f}) |")
    add("")


STEP = Step("backlog", "backlog", backlog,
            lambda context: context.plan.backlog_timeout + context.plan.backlog / 20 + 600, (section,))
