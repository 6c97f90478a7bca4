"""The clock's pass when the database goes away in the middle of a job: the pass ends, the
connection is reset after the lock's connection context is closed, and the next pass runs."""

from __future__ import annotations

import peewee
import pytest

from webhooks.clock import Job, run_due


@pytest.mark.postgresql  # the lock and its connection context exist on PostgreSQL only
def test_a_job_that_loses_the_database_ends_the_pass_and_the_next_pass_runs(database_url: str) -> None:
    lost_once: list[int] = []
    ran: list[str] = []

    def loses_the_database() -> None:
        if not lost_once:
            lost_once.append(1)
            raise peewee.OperationalError("server closed the connection unexpectedly")
        ran.append("lost")

    schedule = [Job("loses", 1.0, loses_the_database), Job("after", 1.0, lambda: ran.append("after"))]
    run_due(schedule)  # raised IndexError from peewee's emptied connection stack before
    assert ran == [] and all(job.due == 0.0 for job in schedule)  # the pass ended; both are still due
    run_due(schedule)
    assert ran == ["lost", "after"]
