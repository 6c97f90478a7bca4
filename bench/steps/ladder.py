"""Step ``ladder``: how close to schedule every retry of a 3-tier ladder fires, to an endpoint that
always answers 500, while the longest tier is full and the short ones fill."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Any

from bench.kit.markdown import Add, n, overrides, section_of
from bench.kit.procs import Deadline, log
from bench.kit.receiver_process import Receiver
from bench.kit.services import queue_depth
from bench.kit.stack import ServiceStack, running, service_defaults
from bench.kit.stats import percentile
from bench.kit.step import Context, Results, Step

#: The in-flight cap per endpoint when the service's default is below it: retries that fall due
#: together must not be deferred by the cap, or the step measures the cap, not the ladder.
LADDER_MIN_IN_FLIGHT = 16


def ladder(context: Context, deadline: Deadline) -> Results:
    """A 3-tier ladder, an endpoint that always fails: fill the long tier, then the short ones."""
    receiver, plan = context.receiver, context.plan
    from webhooks.durations import name_ms, parse_ms  # the service's own tier names

    tiers = [name_ms(parse_ms(part)) for part in plan.ladder.split(",")]
    # Offline after N failures would park this always-failing endpoint (the health feature, not the
    # ladder); an in-flight cap below LADDER_MIN_IN_FLIGHT would defer retries that fall due together.
    env = {"RETRY_LADDER": plan.ladder, "OFFLINE_AFTER_FAILURES": "1000000000"}
    if int(service_defaults()["ENDPOINT_MAX_IN_FLIGHT"]) < LADDER_MIN_IN_FLIGHT:
        env["ENDPOINT_MAX_IN_FLIGHT"] = str(LADDER_MIN_IN_FLIGHT)
    with running("ladder", env) as stack:
        tenant = stack.tenant("ladder")
        path = "/fail/ladder"
        endpoint = stack.endpoint(tenant, receiver.url(path))
        stack.start_workers(plan.processes)
        time.sleep(2.0)
        long_queue = f"{stack.prefix}.wait.{tiers[-1]}"
        # 1. The first batch walks down the ladder into the longest tier.
        first = stack.paced(tenant, plan.ladder_first, 100.0, timeout=plan.ladder_first / 100 + 60)
        accepted_first = sum(r["status"] == 202 for r in first)
        deadline.wait(lambda: stack.sql.value("SELECT count(*) FROM delivery WHERE endpoint_id = %s AND attempts >= %s",
                                              (endpoint, len(tiers))) >= accepted_first, 0.5, stack.check_alive)
        long_depth = queue_depth(long_queue)
        log(f"   {long_depth} messages wait in {long_queue}; now failing a second batch into the short tiers")
        # 2. A second batch, spread out, goes through the short tiers while the long one is full.
        depths: dict[str, int] = {tier: 0 for tier in tiers}

        def sample_depths() -> None:
            stack.check_alive()
            for tier in tiers:
                depths[tier] = max(depths[tier], queue_depth(f"{stack.prefix}.wait.{tier}"))

        second_rate = plan.ladder_second / plan.ladder_second_seconds
        sent_second: list[dict[str, Any]] = []
        thread = threading.Thread(target=lambda: sent_second.extend(
            stack.paced(tenant, plan.ladder_second, second_rate, timeout=plan.ladder_second_seconds + 60)))
        thread.start()
        deadline.wait(lambda: not thread.is_alive(), 0.5, sample_depths)
        thread.join()
        accepted = sum(1 for r in [*first, *sent_second] if r["status"] == 202)
        # 3. Every delivery fails its last attempt (attempts = tiers + 1).
        deadline.wait(lambda: stack.sql.value("SELECT count(*) FROM delivery WHERE endpoint_id = %s AND status = 'failed'",
                                              (endpoint,)) >= accepted, 0.5, sample_depths)
        stack.stop_workers()
        return {"service_overrides": stack.overrides,
                "ladder": plan.ladder, "first_batch": len(first), "second_batch": len(sent_second),
                "accepted": accepted, "long_tier_depth_before_second": long_depth, "max_tier_depths": depths,
                **_lateness(stack, receiver, endpoint, path, tiers)}


def _lateness(stack: ServiceStack, receiver: Receiver, endpoint: str, path: str, tiers: list[str]) -> dict[str, Any]:
    """Per tier: arrival (the receiver's; in the database ``started_at``) minus the last ``next_attempt_at``."""
    attempts: dict[str, dict[int, tuple[float, float | None]]] = defaultdict(dict)
    event_of: dict[str, str] = {}
    for delivery, event, number, started, next_at in stack.sql.rows(
            "SELECT delivery_id, event_id, attempt_no, extract(epoch FROM started_at), "
            "extract(epoch FROM next_attempt_at) FROM attempt WHERE endpoint_id = %s", (endpoint,)):
        attempts[delivery][number] = (float(started), None if next_at is None else float(next_at))
        event_of[delivery] = event
    arrivals: dict[str, list[float]] = defaultdict(list)
    for t, webhook_id, _ in receiver.dump(path):
        arrivals[webhook_id].append(t)
    by_tier: dict[str, dict[str, list[float]]] = {tier: {"receiver": [], "db": []} for tier in tiers}
    for delivery, rows in attempts.items():
        seen = sorted(arrivals.get(event_of[delivery], []))
        for number, (_, next_at) in rows.items():
            if next_at is None or number > len(tiers) or number + 1 not in rows:
                continue
            tier = tiers[number - 1]
            by_tier[tier]["db"].append(rows[number + 1][0] - next_at)
            if len(seen) > number:
                by_tier[tier]["receiver"].append(seen[number] - next_at)
    summary = {}
    for tier, series in by_tier.items():
        rx, dbl = series["receiver"], series["db"]
        summary[tier] = {"retries": len(rx), "min_s": min(rx, default=float("nan")),
                         "p50_s": percentile(rx, 50), "p99_s": percentile(rx, 99), "max_s": max(rx, default=float("nan")),
                         "db_p99_s": percentile(dbl, 99), "db_max_s": max(dbl, default=float("nan")),
                         "within_1s": sum(1 for x in rx if abs(x) <= 1.0)}
        log(f"   tier {tier}: {len(rx)} retries, lateness p50 {summary[tier]['p50_s']:.3f} s, "
            f"p99 {summary[tier]['p99_s']:.3f} s, max {summary[tier]['max_s']:.3f} s")
    return {"tiers": summary}


@section_of("ladder", "Ladder fidelity")
def section(step: dict[str, Any], r: dict[str, Any], add: Add) -> None:
    depths = ", ".join(f"{tier} {depth}" for tier, depth in step["max_tier_depths"].items())
    add(f"`RETRY_LADDER={step['ladder']}`, an endpoint that always answers 500 (`OFFLINE_AFTER_FAILURES` set out of "
        "reach, so it keeps its ladder instead of parking; `ENDPOINT_MAX_IN_FLIGHT` raised to 16 only where the "
        f"service's default is lower; settings: {overrides(step)}). "
        f"{step['first_batch']} events first (100/s) walked down into the longest tier "
        f"({step['long_tier_depth_before_second']} messages waiting there), then {step['second_batch']} more over "
        f"{r['plan']['ladder_second_seconds']:.0f} s failed into the short tiers while it was full; every delivery "
        f"made all {len(step['tiers']) + 1} attempts. Deepest each tier got: {depths}. Lateness = arrival of attempt "
        "n+1 at the receiver − `next_attempt_at` recorded on attempt n (the DB column: `started_at` of attempt n+1 "
        "instead).")
    add("")
    add("| tier (wait before the retry) | retries | min | p50 | p99 | max | within 1 s | DB p99 | DB max |")
    add("|---|---|---|---|---|---|---|---|---|")
    for tier, t in step["tiers"].items():
        add(f"| {tier} | {t['retries']} | {n(t['min_s'], 3)} s | {n(t['p50_s'], 3)} s | {n(t['p99_s'], 3)} s | "
            f"{n(t['max_s'], 3)} s | {t['within_1s']}/{t['retries']} | {n(t['db_p99_s'], 3)} s | {n(t['db_max_s'], 3)} s |")
    add("")


STEP = Step("ladder", "ladder fidelity", ladder, lambda context: 400 * (1 + context.budget / 4), (section,))
