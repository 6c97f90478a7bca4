"""Step ``retention`` (only with ``--only retention``): the retention purge of 1,000,000 attempts while events
are ingested, on a fresh PostgreSQL database.

Seeds (``bench.kit.seed``) ``--events`` events created 40 days ago (default 250,000, ``ATTEMPTS_PER_EVENT``
attempts each) for one tenant, ingests events through the app in this process at a steady ``RATE``, and runs
the real clock process: ``BASELINE_SECONDS`` with nothing to purge (``RETENTION_DAYS=3650``), then with
``RETENTION_DAYS=30`` until every seeded event is gone (``min(created_at)``, on the purge's own index). Figures:
the purge's duration and rate, the ingest latency of each phase; checks: every seeded row gone, every
ingested event kept.
"""

from __future__ import annotations

import json
import os
import platform
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

from bench.kit.in_process import in_process
from bench.kit.markdown import Add, section_of
from bench.kit.procs import PROCS, Deadline
from bench.kit.stats import summary
from bench.kit.step import Context, Results, Step
from webhooks.storage import db
from webhooks.storage.models import Attempt, Delivery, Event

#: How old the seeded events are (past the 30-day default).
SEED_AGE = timedelta(days=40)

#: Attempts per seeded event; events ingested per second; seconds of ingestion without the purge; seconds
#: the purge may take.
ATTEMPTS_PER_EVENT, RATE, BASELINE_SECONDS, TIMEOUT = 4, 100.0, 60.0, 1800.0


class Ingest:
    """POST /v1/events at a steady rate on a thread, recording each request's latency (ms) by phase."""

    def __init__(self, client: Any, api_key: str, rate: float) -> None:
        self.client, self.rate = client, rate
        self.headers = {"Authorization": f"Bearer {api_key}"}
        self.phase = "warmup"
        self.latencies: dict[str, list[float]] = {}
        self.errors = 0
        self.ids: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="ingest", daemon=True)

    def _run(self) -> None:
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        n = 0
        while not self.stop.is_set():
            n += 1
            started = time.perf_counter()
            response = self.client.post("/v1/events", json={"event_type": "order.created", "payload": {"n": n}},
                                        headers=self.headers)
            elapsed = (time.perf_counter() - started) * 1000
            if response.status_code == 202:
                self.latencies.setdefault(self.phase, []).append(elapsed)
                self.ids.append(response.json["id"])
            else:
                self.errors += 1
            next_at += interval
            self.stop.wait(max(0.0, next_at - time.monotonic()))


def purge_passes(log_text: str) -> tuple[int, float]:
    """Clock passes that purged something, and seconds from the first to the last (from the clock's log)."""
    stamps = [datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f") for line in log_text.splitlines()
              if "retention: purged" in line]
    return len(stamps), (stamps[-1] - stamps[0]).total_seconds() if stamps else 0.0


def purged(cutoff: datetime) -> bool:
    """Is no event older than ``cutoff`` left (``min(created_at)``, on the purge's own index)?"""
    with db.database.connection_context():
        oldest = Event.select(Event.created_at).order_by(Event.created_at).limit(1).scalar()
    return oldest is None or oldest > cutoff


def retention(context: Context, deadline: Deadline) -> Results:
    """Seed old rows, ingest at a steady rate, run the clock without and then with the purge."""
    events = context.args.events or 250_000
    with in_process("retention", queues=True) as service:
        stack = service.stack
        ingest = Ingest(service.client, service.tenant["api_key"], RATE)
        try:
            seeded_in = service.seed(events, ATTEMPTS_PER_EVENT, age=SEED_AGE)
            attempts = Attempt.select().count()
            size = db.database.execute_sql("SELECT pg_size_pretty(pg_database_size(current_database()))").fetchone()[0]
            print(f"seeded {events:,} events, {events:,} deliveries, {attempts:,} attempts "
                  f"in {seeded_in:.1f}s (database {size})", flush=True)
            db.database.close()

            ingest.thread.start()
            clock = stack.start_clock({"RETENTION_DAYS": "3650"})
            log_from = clock.log_path.stat().st_size  # the clock's log, from this run on
            time.sleep(5)
            ingest.phase = "baseline"
            time.sleep(BASELINE_SECONDS)
            PROCS.stop(clock, grace=60.0)

            cutoff = datetime.now(timezone.utc).replace(tzinfo=None) - timedelta(days=30)
            ingest.phase = "purge"
            clock = stack.start_clock({"RETENTION_DAYS": "30"})
            purge = Deadline(TIMEOUT, "the purge")
            purge.wait(lambda: purged(cutoff), 0.5)
            purge_seconds = TIMEOUT - purge.left()
            ingest.phase = "after"
            time.sleep(10)
            ingest.stop.set()
            ingest.thread.join(timeout=30)
            PROCS.stop(clock, grace=60.0)
            log_text = clock.log_path.read_bytes()[log_from:].decode(errors="replace")
            passes, first_to_last = purge_passes(log_text)

            with db.database.connection_context():
                left = {"events": Event.select().where(Event.created_at < cutoff).count(),
                        "deliveries": Delivery.select().where(Delivery.created_at < cutoff).count(),
                        "attempts": Attempt.select().where(Attempt.started_at < cutoff).count()}
                kept = Event.select().where(Event.id.in_(ingest.ids)).count()
        finally:
            ingest.stop.set()
    purged_rows = events * (2 + ATTEMPTS_PER_EVENT)
    result = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{os.cpu_count()} cores, {platform.python_version()}",
        "seeded": {"events": events, "attempts": attempts, "seconds": round(seeded_in, 1), "database": size},
        "purge": {"seconds": round(purge_seconds, 1), "clock_passes": passes,
                  "first_to_last_pass_s": round(first_to_last, 1), "events_per_s": round(events / purge_seconds),
                  "attempts_per_s": round(attempts / purge_seconds), "rows_per_s": round(purged_rows / purge_seconds)},
        "ingest_rate": RATE,
        "ingest": {phase: summary(values) for phase, values in ingest.latencies.items() if phase != "warmup"},
        "ingest_errors": ingest.errors,
        "left_after_purge": left,
        "ingested_kept": f"{kept}/{len(ingest.ids)}",
        "clock_errors": [line for line in log_text.splitlines() if "Traceback" in line or "ERROR" in line][:5],
    }
    result["checks_passed"] = not any(left.values()) and kept == len(ingest.ids) and not ingest.errors
    return result


@section_of("retention", "Retention purge during ingestion (`--only retention`)")
def section(step: dict[str, Any], r: dict[str, Any], add: Add) -> None:
    figures = {key: value for key, value in step.items() if key not in ("status", "wall_seconds")}
    add("```json")
    add(json.dumps(figures, indent=2))
    add("```")
    add("")


STEP = Step("retention", "retention purge during ingestion", retention,
            lambda context: TIMEOUT + BASELINE_SECONDS + 3600, (section,), full_run=False)
