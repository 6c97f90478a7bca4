"""What a fault drill checks once the load is over (settled, attempt logs, lost and duplicates) and its verdict;
deliveries by status (the steps count them too)."""

from __future__ import annotations

from collections import Counter
from typing import Iterable

from bench.kit.services import Sql

#: Delivery statuses with an attempt still to come.
UNFINISHED = ("pending", "retrying")


def unfinished_deliveries(sql: Sql) -> int:
    """Deliveries still waiting for an attempt (the run has not settled while any is)."""
    return int(sql.value("SELECT count(*) FROM delivery WHERE status IN %s", (UNFINISHED,)))


def missing_attempt_logs(sql: Sql) -> int:
    """Deliveries marked delivered without the successful attempt in the attempt log (must be 0)."""
    return int(sql.value(
        "SELECT count(*) FROM delivery d WHERE d.status = 'delivered' AND NOT EXISTS "
        "(SELECT 1 FROM attempt a WHERE a.delivery_id = d.id AND a.outcome = 'delivered')"
    ))


def status_counts(sql: Sql, endpoint: str | None = None) -> dict[str, int]:
    """Deliveries by status (of one endpoint's, or all)."""
    where = "WHERE endpoint_id = %s" if endpoint else ""
    return dict(sql.rows(f"SELECT status, count(*) FROM delivery {where} GROUP BY status ORDER BY status",
                         (endpoint,) if endpoint else ()))


def arrivals(accepted: Iterable[str], received: Iterable[str]) -> dict[str, float]:
    """Accepted event ids against the ``webhook-id`` of every request a receiver got (one endpoint)."""
    wanted = set(accepted)
    counts = Counter(received)
    total = sum(counts.values())
    duplicates = total - len(counts)
    return {
        "accepted": len(wanted),
        "delivered at least once": len(wanted & counts.keys()),
        "lost": len(wanted - counts.keys()),
        "duplicates": duplicates,
        "duplicate rate": duplicates / max(1, total),
    }


def verdict(run: str, checks: dict[str, bool]) -> int:
    """Print a PASS or FAIL line per check and a summary line; the exit status (1 if any failed)."""
    for name, ok in checks.items():
        print(f"{'PASS' if ok else 'FAIL'}: {name}")
    failed = sum(not ok for ok in checks.values())
    print(f"{run}: {len(checks) - failed} passed, {failed} failed")
    return 1 if failed else 0
