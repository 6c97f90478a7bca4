"""Losing a RabbitMQ node under load: the service on a 3-node cluster of its own, the leader of its primary queue
killed (``python bench/run.py failover --help``; the scenario and what it checks: ``docs/reliability.md``). Exit
status 1 if a check fails. Timings on a shared 2-core machine are indicative only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.kit import drill
from bench.kit.cluster import DLX_CONFIRM_TIMEOUT_MS, Cluster
from bench.kit.procs import log
from bench.kit.receiver import FLAKY_PREFIX, flaky_failures
from bench.kit.receiver_process import Receiver
from bench.kit.services import postgres_version, queue_depth
from bench.kit.stack import ServiceStack
from bench.kit.stats import percentile

#: The ladder of the run: short, so retries and dead letters happen within the run.
LADDER = "1s,2s,4s"
ATTEMPTS = 4

#: Event type -> receiver path of the endpoint that subscribes to it.
ROUTES = {
    "order.created": "/ok-a",
    "order.paid": "/ok-b",
    "order.shipped": f"{FLAKY_PREFIX.decode()}-a",
    "order.refunded": f"{FLAKY_PREFIX.decode()}-b",
}

#: After a restart, this much longer still counts as the failover (seconds).
RECOVERY = 30.0

#: Every accepted event arrives within this long of the last POST, a node down or not (issue 36).
ARRIVAL_TARGET = 60.0


@dataclass
class Kill:
    """One node loss: which node, when it was killed and restarted (unix times)."""

    node: str
    was_leader: bool
    at: float
    restarted_at: float = 0.0
    leader_after: str = ""

    @property
    def window(self) -> tuple[float, float]:
        """The failover: from the kill until ``RECOVERY`` after the restart."""
        return self.at, (self.restarted_at or self.at) + RECOVERY


@dataclass
class Faults:
    """The kill schedule, run on a thread beside the load."""

    cluster: Cluster
    queue: str
    kill_at: tuple[float, float]
    down: float
    leave_last_down: bool = False
    kills: list[Kill] = field(default_factory=list)
    error: BaseException | None = None

    def run(self, started: float) -> None:
        try:
            for offset in self.kill_at:
                time.sleep(max(0.0, started + offset - time.time()))
                leader = self._leader_after(dead="")
                killed_before = {kill.node for kill in self.kills}
                victim = leader if leader not in killed_before else next(
                    node.name for node in self.cluster.nodes if node.name not in killed_before | {leader})
                node = self.cluster.node_named(victim)
                kill = Kill(victim, victim == leader, time.time())
                self.cluster.kill(node)
                self.kills.append(kill)
                log(f"kill -9 {victim} ({'leader of' if kill.was_leader else 'a follower of'} {self.queue})")
                kill.leader_after = self._leader_after(victim)
                log(f"{self.queue} is led by {kill.leader_after}")
                if self.leave_last_down and len(self.kills) == len(self.kill_at):
                    log(f"{victim} stays down")
                    continue
                time.sleep(max(0.0, kill.at + self.down - time.time()))
                self.cluster.restart(node)
                kill.restarted_at = time.time()
                log(f"{victim} restarted")
        except BaseException as error:  # noqa: BLE001 - reported by the main thread
            self.error = error

    def _leader_after(self, dead: str) -> str:
        """The queue's leader once it is not ``dead`` (while a leader is elected or a restarted node catches up,
        the queue may have none or be listed by no node)."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                leader, _ = self.cluster.leader(self.queue)
                if leader != dead:
                    return leader
            except (RuntimeError, KeyError):
                pass
            time.sleep(0.5)
        return "none within 30 s"


def answers(dump: list[tuple[float, str, str]]) -> dict[tuple[str, str], list[tuple[float, bool]]]:
    """Per (path, webhook-id): each request's arrival time and whether the receiver answered 2xx."""
    requests: dict[tuple[str, str], list[tuple[float, bool]]] = {}
    for arrived, webhook_id, path in dump:
        earlier = requests.setdefault((path, webhook_id), [])
        succeeded = not path.startswith(FLAKY_PREFIX.decode()) or len(earlier) >= flaky_failures(webhook_id.encode())
        earlier.append((arrived, succeeded))
    return requests


def longest_gap(times: list[float], start: float, end: float) -> tuple[float, float]:
    """(length, start) of the longest pause in arrivals between ``start`` and ``end`` (counted from ``start``
    when deliveries had already paused before it)."""
    best = (0.0, start)
    for before, after in zip(times, times[1:]):
        began = max(before, start)
        if after > start and before < end and after - began > best[0]:
            best = (after - began, began)
    return best


def log_lines(path: Path, pattern: str, since: float) -> list[tuple[float, re.Match[str]]]:
    """(unix time, match) of each line of a process log matching ``pattern`` from ``since`` on (logs are
    appended to from run to run)."""
    lines = path.read_text(errors="replace").splitlines()
    return [(at, match) for line in lines if (match := re.search(pattern, line)) and (at := line_time(line)) >= since]


def line_time(line: str) -> float:
    """Unix time of a log line (0 for a line without one)."""
    match = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ", line)
    if not match:
        return 0.0
    return datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").timestamp() + int(match.group(2)) / 1000


def lateness(stack: ServiceStack) -> list[tuple[float, float]]:
    """(when the retry was due, how late it started) for every retry of the ladder, in seconds."""
    rows = stack.sql.rows(
        "SELECT extract(epoch FROM a.next_attempt_at), extract(epoch FROM b.started_at) FROM attempt a "
        "JOIN attempt b ON b.delivery_id = a.delivery_id AND b.attempt_no = a.attempt_no + 1 "
        "WHERE a.next_attempt_at IS NOT NULL AND b.trigger = 'ladder'")
    return [(float(due), float(started) - float(due)) for due, started in rows]


def summary(values: list[float]) -> str:
    if not values:
        return "none"
    return (f"{len(values)}: p50 {percentile(values, 50):.2f} s, p99 {percentile(values, 99):.2f} s, "
            f"max {max(values):.2f} s")


def analyse(stack: ServiceStack, sent: list[dict[str, Any]], dump: list[tuple[float, str, str]], faults: Faults,
            load_start: float) -> tuple[dict[str, Any], dict[str, bool]]:
    accepted = {row["id"]: row for row in sent if row["status"] == 202}
    # Every event the API stored counts, including those whose client never saw the 202
    # (it timed out): the 202 only says the event was committed, and it was.
    stored = [event_id for (event_id,) in stack.sql.rows(
        "SELECT id FROM event WHERE event_type IN %s", (tuple(ROUTES),))]
    routes = dict(stack.sql.rows(
        "SELECT d.event_id, e.url FROM delivery d JOIN endpoint e ON e.id = d.endpoint_id"))
    statuses = dict(stack.sql.rows("SELECT event_id, status FROM delivery"))
    answered = answers(dump)
    lost, delivered, exhausted, duplicates, mismatched = [], 0, 0, 0, 0
    for event_id in stored:
        path = urlsplit(routes[event_id]).path if event_id in routes else None
        requests = answered.get((path, event_id), []) if path else []
        successes = sum(ok for _, ok in requests)
        duplicates += max(0, successes - 1)
        if successes:
            delivered += 1
            mismatched += statuses.get(event_id) != "delivered"
        elif statuses.get(event_id) == "failed" and len(requests) >= ATTEMPTS:
            exhausted += 1
        else:
            lost.append(event_id)
    results: dict[str, Any] = {
        "events sent": len(sent),
        "events accepted (the client saw the 202)": len(accepted),
        "clients that never got a 202": len(sent) - len(accepted),
        "events stored (committed by the API)": len(stored),
        "accepted but not stored (must be 0)": len(accepted.keys() - set(stored)),
        "deliveries delivered (receiver answered 2xx)": delivered,
        "deliveries exhausted (every attempt failed, status failed)": exhausted,
        "lost": len(lost),
        "lost (first ids)": lost[:5],
        "duplicate deliveries (2xx again for the same event)": duplicates,
        "duplicate rate": duplicates / max(1, delivered),
        "requests to the receiver": len(dump),
        "attempts recorded": stack.sql.value("SELECT count(*) FROM attempt"),
        "status in the database disagrees with the receiver": mismatched,
        "attempt log missing": drill.missing_attempt_logs(stack.sql),
        "messages in the dead-letter queue": queue_depth(f"{stack.prefix}.dead", stack.env["AMQP_URL"]),
        **{f"status {k}": v for k, v in stack.status_counts().items()},
        "refused requests (all)": sum(len(row.get("refusals", [])) for row in sent),
        "idempotent replays (a retry found its event already accepted)": sum(bool(row.get("replayed")) for row in sent),
    }
    arrivals = sorted(arrived for arrived, _, _ in dump)
    retries = lateness(stack)
    in_failover = [False] * len(retries)
    for number, kill in enumerate(faults.kills, 1):
        start, end = kill.window
        gap, began = longest_gap(arrivals, start, end)
        first_after = next((t for t in arrivals if t > kill.at), None)
        refused = [(t, status) for row in sent for t, status in row.get("refusals", []) if start <= t <= end]
        affected = [row for row in sent if any(start <= t <= end for t, _ in row.get("refusals", []))]
        late = [late for due, late in retries if start <= due <= end]
        in_failover = [flag or start <= due <= end for flag, (due, _) in zip(in_failover, retries)]
        consuming = {
            child.name: [round(t - kill.at, 1) for t, _ in log_lines(child.log_path, "consuming", kill.at)][:3]
            for child in stack.workers
        }
        lost_broker = sum(len(log_lines(child.log_path, "broker connection lost", kill.at)) for child in stack.workers)
        results[f"kill {number}"] = {
            "node": kill.node,
            "was leader of the primary queue": kill.was_leader,
            "at (s into the load)": round(kill.at - load_start, 1),
            "new leader": kill.leader_after,
            "restarted after (s)": round(kill.restarted_at - kill.at, 1) if kill.restarted_at else None,
            "first delivery after the kill (s)": round(first_after - kill.at, 2) if first_after else None,
            "longest pause in deliveries (s)": round(gap, 2),
            "longest pause began (s after the kill)": round(began - kill.at, 1),
            "requests refused by the API": len(refused),
            "refusals by answer": dict(Counter(str(status) for _, status in refused)),
            "events whose client retried": len(affected),
            "of those, accepted in the end": sum(row["status"] == 202 for row in affected),
            "ladder retries due in the failover, lateness": summary(late),
            "workers: 'consuming' logged (s after the kill)": consuming,
            "workers: 'broker connection lost' lines": lost_broker,
        }
    results["ladder retries outside the failovers, lateness"] = summary(
        [late for flag, (_, late) in zip(in_failover, retries) if not flag])
    last_post = max((row["end"] for row in sent if row.get("status") == 202), default=load_start)
    arrived = {event_id: min(at for at, ok in requests if ok)  # when the receiver first answered it 2xx
               for (_, event_id), requests in answered.items() if any(ok for _, ok in requests)}
    late_events = sorted(at - last_post for at in arrived.values() if at - last_post > ARRIVAL_TARGET)
    results["last event arrived after the last POST (s)"] = round(max(arrived.values(), default=last_post) - last_post, 1)
    results[f"events first delivered more than {ARRIVAL_TARGET:.0f} s after the last POST"] = len(late_events)
    results["worker and web log lines: deadlock detected"] = sum(
        len(log_lines(child.log_path, "deadlock detected", load_start))
        for child in (*stack.workers, stack.web, stack.clock) if child is not None)
    republished = log_lines(stack.clock.log_path, r"published again (\d+) deliveries", load_start) if stack.clock else []
    results["republished by the sweeper (clock log)"] = sum(int(found.group(1)) for _, found in republished)
    checks = {
        "every stored event delivered or exhausted (0 lost)": not lost and len(stored) > 0,
        "every event a client saw accepted was stored": not accepted.keys() - set(stored),
        "duplicates under 1 %": results["duplicate rate"] < 0.01,
        "every client got its 202 in the end": len(accepted) == len(sent),
        "every delivered delivery has its attempt log": results["attempt log missing"] == 0,
        f"every event delivered within {ARRIVAL_TARGET:.0f} s of the last POST": not late_events,
    }
    return results, checks


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rate", type=float, default=200.0, help="events per second")
    parser.add_argument("--seconds", type=float, default=300.0, help="how long events are posted")
    parser.add_argument("--down", type=float, default=45.0, help="seconds a killed node stays down")
    parser.add_argument("--settle", type=float, default=900.0, help="seconds to wait for deliveries after the load")
    parser.add_argument("--quick", action="store_true", help="CI size: 60 s at 50/s, nodes down 10 s")
    parser.add_argument("--leave-down", action="store_true", help="the second killed node is not restarted")
    parser.add_argument("--kills", type=int, choices=(0, 1, 2), default=2, help="node kills (0: a baseline run)")
    parser.add_argument("--rabbitmq-defaults", action="store_true",
                        help="keep RabbitMQ's 180 s dead-letter confirm timeout instead of bench/kit/cluster.py's 5 s")


def main(args: argparse.Namespace) -> int:
    if args.quick:
        args.rate, args.seconds, args.down, args.settle = 50.0, 60.0, 10.0, 300.0
    kill_at = (args.seconds * 0.15, args.seconds * 0.55)[:args.kills]
    cluster = drill.own_broker("failover", dlx_confirm_timeout_ms=None if args.rabbitmq_defaults
                               else DLX_CONFIRM_TIMEOUT_MS)
    started = time.monotonic()
    cluster.start()
    log(f"3-node cluster up in {time.monotonic() - started:.0f} s: {cluster.amqp_url}")
    stack = drill.service("failover", cluster, {
        "RETRY_LADDER": LADDER, "WORKER_THREADS": "8", "ENDPOINT_MAX_IN_FLIGHT": "16",
        # Endpoint health is another run's subject: a flaky endpoint stays online here.
        "OFFLINE_AFTER_FAILURES": "1000000",
    })
    stack.release()
    receiver = Receiver("failover-receiver").start()
    drill.start(stack)
    tenant = stack.tenant("failover")
    for event_type, path in ROUTES.items():
        stack.endpoint(tenant, receiver.url(path), event_types=[event_type])
    faults = Faults(cluster, f"{stack.prefix}.deliver", kill_at, args.down, args.leave_down)
    count = int(args.rate * args.seconds)
    log(f"posting {count} events at {args.rate:g}/s; kill -9 at {', '.join(f'{at:.0f} s' for at in kill_at) or 'no time'}, "
        f"each node down {args.down:.0f} s")
    load_start = time.time()
    threading.Thread(target=faults.run, args=(load_start,), daemon=True).start()
    sent = stack.paced(tenant, count, args.rate, timeout=args.seconds + 900, event_types=list(ROUTES),
                       idempotency_prefix=f"failover-{os.getpid()}")
    log(f"load done: {sum(row['status'] == 202 for row in sent)} of {len(sent)} accepted; waiting for the kills")
    while len(faults.kills) < len(kill_at) or (faults.kills and not faults.kills[-1].restarted_at
                                                 and not args.leave_down):
        if faults.error is not None:
            raise faults.error
        time.sleep(0.5)

    def settled() -> bool:
        stack.check_alive()
        return drill.unfinished_deliveries(stack.sql) == 0

    drill.settle(args.settle, settled, every=2.0)
    time.sleep(2)  # requests still on the wire
    results, checks = analyse(stack, sent, receiver.dump(), faults, load_start)
    drill.heading("failover")
    print(f"RabbitMQ {cluster.ctl(cluster.nodes[0], 'version').strip()}, 3 nodes, dead-letter confirm timeout "
          f"{cluster.dlx_confirm_timeout_ms or 180000} ms; PostgreSQL {postgres_version()}")
    print(json.dumps(results, indent=2, default=str))
    return drill.verdict("failover", checks)
