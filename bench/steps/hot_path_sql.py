"""Step ``hot_path_sql`` (only with ``--only hot_path_sql``): PostgreSQL's CPU per attempt on the worker's hot
path, the claim and the record, in this process.

A fresh database migrated to the latest schema gets one tenant, one endpoint and
``--deliveries`` pending deliveries. Then, one batch of ``--claim-batch`` at a time as a worker
does, the deliveries are claimed (``claims.claim_many``) and their successful attempts recorded
(``records.record_many``). The figure is the CPU time of the PostgreSQL backend serving that
connection, per attempt: it does not move with the other processes on the machine the way a rate
does. ``--indexes-before-0013`` first puts back the indexes migration 0013 dropped, to compare
the two schemas on the same machine.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from bench.kit.in_process import in_process
from bench.kit.markdown import Add, heading
from bench.kit.procs import Deadline
from bench.kit.step import Context, Results, Step
from webhooks.delivery.claims import ClaimState, claim_many
from webhooks.delivery.records import Outcome, record_many
from webhooks.messaging.messages import DeliveryMessage
from webhooks.storage import db
from webhooks.storage.ids import new_id
from webhooks.storage.models import Delivery, Event
from webhooks.storage.timeutil import utcnow

#: The indexes migration 0013 dropped: (table, name, columns).
BEFORE_0013 = (
    ("delivery", "delivery_endpoint_id_lease_until", "endpoint_id, lease_until"),
    ("delivery", "delivery_endpoint_id", "endpoint_id"),
    ("attempt", "attempt_delivery_id", "delivery_id"),
    ("attempt", "attempt_endpoint_id", "endpoint_id"),
    ("attempt", "attempt_event_id", "event_id"),
)

#: What a delivered attempt records of the request and the answer (as a fast receiver answers).
REQUEST_HEADERS = {"webhook-id": "msg_x", "webhook-timestamp": "1795000000", "content-type": "application/json",
                   "webhook-signature": "v1," + "A" * 44, "user-agent": "webhooks/1.0"}
RESPONSE_HEADERS = {"content-type": "text/plain; charset=utf-8", "content-length": "2", "date": "Tue, 24 Nov 2026"}


def _seed(count: int, tenant: str, endpoint: str) -> list[DeliveryMessage]:
    messages: list[DeliveryMessage] = []
    created = utcnow()
    for start in range(0, count, 1000):
        events, deliveries = [], []
        for n in range(start, min(count, start + 1000)):
            event_id, delivery_id = new_id("evt"), new_id("dlv")
            events.append({"id": event_id, "tenant": tenant, "seq": n + 1, "event_type": "order.created",
                           "payload": {"n": n}, "created_at": created})
            deliveries.append({"id": delivery_id, "tenant": tenant, "event": event_id, "endpoint": endpoint,
                               "status": "pending", "created_at": created, "updated_at": created})
            messages.append(DeliveryMessage(delivery_id, event_id, endpoint, tenant, "order.created",
                                            created.isoformat() + "Z", {"n": n}))
        with db.write():
            Event.insert_many(events).execute()
            Delivery.insert_many(deliveries).execute()
    return messages


def _outcome(message: DeliveryMessage) -> Outcome:
    return Outcome(
        attempt_id=new_id("att"), status="delivered", next_attempt_at=None,
        attempt_fields={"started_at": utcnow(), "duration_ms": 0.8, "url": "http://127.0.0.1:9/hook",
                        "request_headers": REQUEST_HEADERS, "response_status": 200,
                        "response_headers": RESPONSE_HEADERS, "response_body": "ok", "error_class": None, "error": None},
        last_status_code=200, last_error=None,
    )


def hot_path_sql(context: Context, deadline: Deadline) -> Results:
    """Claim and record the seeded deliveries one batch at a time; the backend's CPU per attempt."""
    import psutil  # the benchmark's own virtualenv has it; the service's, where the tests import this, need not

    args = context.args
    with in_process("hot_path") as service:
        if args.indexes_before_0013:
            for table, index, columns in BEFORE_0013:
                db.database.execute_sql(f'CREATE INDEX "{index}" ON "{table}" ({columns})')
        messages = _seed(args.deliveries, service.tenant["id"], service.endpoint)
        backend = psutil.Process(db.database.execute_sql("SELECT pg_backend_pid()").fetchone()[0])
        before, started = backend.cpu_times(), time.perf_counter()
        for start in range(0, len(messages), args.claim_batch):
            batch = messages[start:start + args.claim_batch]
            claims = claim_many(batch, 20.0)
            assert all(claim.state is ClaimState.CLAIMED for claim in claims), "every attempt is claimed"
            assert all(record_many([(m, _outcome(m)) for m in batch], 5)), "every attempt is recorded"
        elapsed, after = time.perf_counter() - started, backend.cpu_times()
        cpu = (after.user + after.system) - (before.user + before.system)
        attempts = db.database.execute_sql("SELECT count(*) FROM attempt").fetchone()[0]
    schema = "indexes before 0013" if args.indexes_before_0013 else "latest schema"
    return {"schema": schema, "attempts": attempts, "batch": args.claim_batch,
            "backend_cpu_ms_per_attempt": 1000 * cpu / attempts, "attempts_per_s": attempts / elapsed}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("step hot_path_sql")
    group.add_argument("--deliveries", type=int, default=20_000)
    group.add_argument("--claim-batch", type=int, default=128, help="deliveries claimed and recorded at a time")
    group.add_argument("--indexes-before-0013", action="store_true")


def section(r: dict[str, Any], add: Add) -> None:
    step = r.get("hot_path_sql")
    if not heading(add, "PostgreSQL's CPU per attempt on the hot path (`--only hot_path_sql`)", step):
        return
    add(f"{step['schema']}: {step['attempts']} attempts in batches of {step['batch']}: PostgreSQL backend "
        f"{step['backend_cpu_ms_per_attempt']:.3f} ms CPU per attempt; {step['attempts_per_s']:,.0f} attempts/s in one "
        "thread")
    add("")


STEP = Step("hot_path_sql", "PostgreSQL's CPU per attempt on the hot path", hot_path_sql, lambda context: 600,
            (section,), full_run=False, add_arguments=add_arguments)
