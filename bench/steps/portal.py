"""Step ``portal`` (only with ``--only portal``): how fast the customer portal's pages answer for a
tenant with a long history, on a fresh PostgreSQL database.

Seeds (``bench.kit.seed``) ``EVENTS`` events over ``DAYS`` days for one tenant and one endpoint, every 50th
delivery failed; then opens a portal session and requests each page (``pages``) through the app in this
process (the Flask test client: the time is the app's and the database's, no network).
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from bench.kit.in_process import in_process
from bench.kit.markdown import Add, section_of
from bench.kit.procs import Deadline
from bench.kit.stats import summary
from bench.kit.step import Context, Results, Step
from webhooks.portal import access
from webhooks.storage import db
from webhooks.storage.models import Attempt, Delivery, Event, Tenant

#: The page latency every portal page should stay under at p95 (issue 32).
TARGET_P95_MS = 100.0

#: Event types the seeded events take in turn.
EVENT_TYPES = ("order.created", "order.paid", "invoice.paid", "refund.made")

#: Seeded events (``--quick``: ``QUICK_EVENTS``) with their attempts each, over that many days to now; requests
#: measured per page.
EVENTS, QUICK_EVENTS, ATTEMPTS, DAYS, REQUESTS = 100_000, 5_000, 10, 10.0, 40


def pages(endpoint_id: str, event_id: str) -> dict[str, str]:
    """Each portal page measured, by name."""
    return {
        "endpoints": "/portal/",
        "endpoint": f"/portal/endpoints/{endpoint_id}",
        "endpoint form (types with counts)": "/portal/endpoints/new",
        "event log": "/portal/events",
        "event log, one type": "/portal/events?event_type=refund.made",
        "event log, failed": "/portal/events?status=failed",
        "event log, last hour": "/portal/events?since=1h",
        "event": f"/portal/events/{event_id}",
    }


def measure(client: Any, path: str, requests: int, deadline: Deadline) -> dict[str, float]:
    for _ in range(3):
        assert client.get(path).status_code == 200, path
    times = []
    for _ in range(requests):
        deadline.check()
        started = time.perf_counter()
        response = client.get(path)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, path
    return summary(times, (50, 95), digits=1)


def portal(context: Context, deadline: Deadline) -> Results:
    events = QUICK_EVENTS if context.plan.quick else EVENTS
    with in_process("portal") as service:
        database = db.database
        span = timedelta(days=DAYS)
        seeded_in = service.seed(events, ATTEMPTS, age=span, spacing=span / events, body_bytes=200,
                                 event_types=EVENT_TYPES)
        database.execute_sql("UPDATE delivery SET status = 'failed' WHERE right(id, 2) IN ('00', '50')")
        database.execute_sql("VACUUM ANALYZE delivery")
        counts = {"events": Event.select().count(), "attempts": Attempt.select().count(),
                  "failed deliveries": Delivery.select().where(Delivery.status == "failed").count()}
        size = database.execute_sql("SELECT pg_size_pretty(pg_database_size(current_database()))").fetchone()[0]
        print(f"seeded {counts} in {seeded_in:.1f}s (database {size})", flush=True)
        newest = Event.select(Event.id).order_by(Event.id.desc()).first().id
        with service.app.app_context():
            link = access.create_link(Tenant.get_by_id(service.tenant["id"]), None)
        client = service.client
        assert client.get(urlsplit(link.url).path).status_code == 303
        figures = {page: measure(client, path, REQUESTS, deadline)
                   for page, path in pages(service.endpoint, newest).items()}
    for page, figure in figures.items():
        print(f"{page}: {figure}", flush=True)
    return {
        "seeded": {**counts, "days": DAYS, "seconds": round(seeded_in, 1), "database": size},
        "requests_per_page": REQUESTS,
        "pages": figures,
        "target_met": all(figure["p95_ms"] < TARGET_P95_MS for figure in figures.values()),
    }


@section_of("portal", "Portal pages with a long history (`--only portal`)")
def section(step: dict[str, Any], r: dict[str, Any], add: Add) -> None:
    seeded = step["seeded"]
    add(f"{seeded['events']:,} events and {seeded['attempts']:,} attempts over {seeded['days']:g} days for one tenant "
        f"({seeded['database']}); {step['requests_per_page']} requests per page through the app in one process "
        f"(no network), on PostgreSQL. Target: p95 under {TARGET_P95_MS:g} ms: "
        f"{'met' if step['target_met'] else 'not met'}.")
    add("")
    add("| page | p50 | p95 | slowest |")
    add("|---|---:|---:|---:|")
    for page, figure in step["pages"].items():
        add(f"| {page} | {figure['p50_ms']} ms | {figure['p95_ms']} ms | {figure['max_ms']} ms |")
    add("")


STEP = Step("portal", "portal pages with a long history", portal, lambda context: 1800 * context.budget, (section,),
            full_run=False)
