"""The retention purge (RETENTION_DAYS): what goes, what stays, in batches, and the catch-up cursor."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, Iterator

import pytest

from tests.api_helpers import create_endpoint, make_attempt, send
from webhooks.storage import retention
from webhooks.api import events as events_api
from webhooks.clock import jobs, tick
from webhooks.config import Settings
from webhooks.storage.models import Attempt, Delivery, Event, IdempotencyKey, ManualAttempt, RetentionMark
from webhooks.messaging.publisher import Publisher
from webhooks.storage.timeutil import utcnow

DAYS = 30


def finish(event: dict[str, Any], *, age_days: float, status: str = "delivered", attempts: int = 2) -> None:
    """Make ``event`` ``age_days`` old, its deliveries ``status`` since then, with ``attempts`` each."""
    then = utcnow() - timedelta(days=age_days)
    Event.update(created_at=then).where(Event.id == event["id"]).execute()
    for delivery in list(Delivery.select().where(Delivery.event == event["id"])):  # no read open while writing
        for number in range(1, attempts + 1):
            make_attempt(delivery.id, number, started_at=then)
        Delivery.update(status=status, attempts=attempts, updated_at=then).where(Delivery.id == delivery.id).execute()


def kept(event: dict[str, Any]) -> bool:
    return Event.select().where(Event.id == event["id"]).exists()


@pytest.fixture
def endpoint(client: Any, headers: dict[str, str]) -> dict[str, Any]:
    return create_endpoint(client, headers)


def test_old_finished_events_go_with_their_deliveries_attempts_and_idempotency_keys(client, headers, endpoint):
    old = send(client, headers, idempotency_key="order-1")
    finish(old, age_days=DAYS + 1)
    young = send(client, headers)
    finish(young, age_days=DAYS - 1)

    purged = retention.purge(DAYS)

    assert (purged.events, purged.deliveries, purged.attempts) == (1, 1, 2)
    assert not kept(old) and kept(young)
    assert not Delivery.select().where(Delivery.event == old["id"]).exists()
    assert not Attempt.select().where(Attempt.event == old["id"]).exists()
    assert not IdempotencyKey.select().where(IdempotencyKey.event == old["id"]).exists()
    assert Attempt.select().where(Attempt.event == young["id"]).count() == 2


def test_an_old_event_goes_with_the_record_of_who_resent_it(client, headers, endpoint):
    event = send(client, headers)
    (delivery,) = Delivery.select().where(Delivery.event == event["id"])
    ManualAttempt.create(delivery=delivery.id, event=event["id"], tenant=delivery.tenant_id, attempt_no=2,
                         trigger="resend", requested_by_kind="cli", requested_by="support")
    finish(event, age_days=DAYS + 1)

    assert retention.purge(DAYS).events == 1
    assert not ManualAttempt.select().exists()


@pytest.mark.parametrize("status", ["pending", "retrying", "parked"])
def test_an_old_event_with_a_delivery_still_waiting_is_kept_whole(client, headers, endpoint, status):
    create_endpoint(client, headers)  # a second endpoint: the event has two deliveries
    event = send(client, headers)
    finish(event, age_days=DAYS + 10)
    waiting, _other = Delivery.select().where(Delivery.event == event["id"]).order_by(Delivery.id)
    Delivery.update(status=status).where(Delivery.id == waiting.id).execute()

    assert retention.purge(DAYS).events == 0
    assert kept(event)
    assert Delivery.select().where(Delivery.event == event["id"]).count() == 2
    assert Attempt.select().where(Attempt.event == event["id"]).count() == 4


def test_an_old_event_whose_delivery_changed_within_the_period_is_kept(client, headers, endpoint):
    event = send(client, headers)
    finish(event, age_days=DAYS + 10)
    Delivery.update(updated_at=utcnow() - timedelta(days=2)).where(Delivery.event == event["id"]).execute()  # resent

    assert retention.purge(DAYS).events == 0
    assert kept(event)


def test_each_transaction_purges_at_most_one_batch(client, headers, endpoint, monkeypatch):
    events = [send(client, headers) for _ in range(5)]
    for event in events:
        finish(event, age_days=DAYS + 1)
    per_transaction: list[int] = []
    real_write = retention.write

    @contextmanager
    def counting_write() -> Iterator[None]:
        before = Event.select().count()
        with real_write():
            yield
        per_transaction.append(before - Event.select().count())

    monkeypatch.setattr(retention, "write", counting_write)
    assert retention.purge(DAYS, limit=2).events == 5
    assert per_transaction == [2, 2, 1]
    assert Event.select().count() == 0


def test_the_purge_carries_on_past_old_events_it_must_keep(client, headers, endpoint):
    waiting = [send(client, headers) for _ in range(2)]
    for event in waiting:
        finish(event, age_days=DAYS + 2, status="retrying")
    finished = send(client, headers)
    finish(finished, age_days=DAYS + 1)

    assert retention.purge(DAYS, limit=2).events == 1
    assert all(kept(event) for event in waiting) and not kept(finished)


def test_the_clock_job_purges_a_bounded_slice_per_pass_then_rests(client, headers, endpoint):
    events = [send(client, headers) for _ in range(5)]
    for event in events:
        finish(event, age_days=DAYS + 1)
    now = [0.0]
    purger = retention.Purger(DAYS, run_seconds=0.0, idle_seconds=300.0, limit=2, clock=lambda: now[0])

    assert [purger.run().events for _ in range(3)] == [2, 2, 1]
    assert purger.caught_up
    late = send(client, headers)
    finish(late, age_days=DAYS + 1)
    assert purger.run().events == 0  # resting
    now[0] += 300.0
    assert purger.run().events == 1
    assert purger.caught_up and Event.select().count() == 0


def test_the_clock_runs_the_retention_job(client, headers, endpoint, settings):
    old = send(client, headers)
    finish(old, age_days=DAYS + 1)
    young = send(client, headers)

    publisher = Publisher(settings.amqp_url)
    try:
        assert "retention" in [job.name for job in jobs(settings, publisher)]
        tick(settings, publisher)
    finally:
        publisher.close()

    assert not kept(old) and kept(young)


def test_retention_days_comes_from_the_environment_and_must_be_a_whole_number_of_days():
    assert Settings.from_env(env={}).retention_days == 30
    assert Settings.from_env(env={"RETENTION_DAYS": "7"}).retention_days == 7
    for bad in ("0", "1.5", "week"):
        with pytest.raises(ValueError, match="RETENTION_DAYS must be a whole number of days"):
            Settings.from_env(env={"RETENTION_DAYS": bad})


# --- the catch-up cursor -----------------------------------------------------------------


def feed(client: Any, headers: dict[str, str], after: int, **params: Any) -> Any:
    return client.get("/v1/events", query_string={"after": after, **params}, headers=headers)


def test_a_cursor_behind_the_purged_events_gets_410_naming_where_to_continue(client, headers, endpoint):
    events = [send(client, headers) for _ in range(5)]  # seq 1..5
    for event in events[:3]:
        finish(event, age_days=DAYS + 1)
    retention.purge(DAYS)

    for after, params in ((1, {}), (2, {"event_type": "order.created"})):
        response = feed(client, headers, after, **params)
        assert response.status_code == 410
        assert response.json["message"] == (
            f"after={after} is older than the retention period (30 days): events up to seq=3 were purged. "
            "Continue with after=3; the oldest event kept after it is seq=4")

    continued = feed(client, headers, 3)
    assert continued.status_code == 200
    assert [event["seq"] for event in continued.json["data"]] == [4, 5]


def test_a_cursor_at_or_past_the_purged_events_and_a_start_from_zero_read_what_is_kept(client, headers, endpoint):
    events = [send(client, headers) for _ in range(4)]
    finish(events[0], age_days=DAYS + 2, status="parked")  # old but still waiting: kept
    finish(events[1], age_days=DAYS + 1)
    retention.purge(DAYS)

    assert [e["seq"] for e in feed(client, headers, 0).json["data"]] == [1, 3, 4]
    assert [e["seq"] for e in feed(client, headers, 2).json["data"]] == [3, 4]
    assert feed(client, headers, 1).status_code == 410


def test_the_purge_mark_is_per_tenant_and_never_goes_down(client, headers, endpoint, other_tenant, auth):
    mine = [send(client, headers) for _ in range(3)]
    create_endpoint(client, auth(other_tenant))
    theirs = [send(client, auth(other_tenant)) for _ in range(2)]
    finish(mine[2], age_days=DAYS + 1)
    retention.purge(DAYS)
    finish(mine[0], age_days=DAYS + 1)
    retention.purge(DAYS)

    assert retention.purged_seq(Event.get_by_id(mine[1]["id"]).tenant_id) == 3
    assert RetentionMark.select().count() == 1
    assert feed(client, auth(other_tenant), 1).status_code == 200
    assert [e["seq"] for e in feed(client, auth(other_tenant), 1).json["data"]] == [theirs[1]["seq"]]


def test_a_purge_committed_while_a_page_is_read_is_reported_not_skipped(client, headers, endpoint, monkeypatch):
    events = [send(client, headers) for _ in range(3)]
    for event in events[:2]:
        finish(event, age_days=DAYS + 1)
    real_cursor_page = events_api.cursor_page

    def page_then_purge(*args: Any, **kwargs: Any) -> dict[str, Any]:
        page = real_cursor_page(*args, **kwargs)  # seq 2 and 3 are on this page ...
        retention.purge(DAYS)  # ... and seq 2 is purged before the answer goes out
        return page

    monkeypatch.setattr(events_api, "cursor_page", page_then_purge)
    assert feed(client, headers, 1).status_code == 410


@pytest.mark.postgresql  # SQLite has one writer at a time by design
def test_ingestion_does_not_wait_for_a_purge_transaction_on_postgresql(client, headers, endpoint, monkeypatch):
    old = [send(client, headers) for _ in range(3)]
    for event in old:
        finish(event, age_days=DAYS + 1)
    inside, release = threading.Event(), threading.Event()
    real_raise_marks = retention._raise_marks

    def raise_marks_and_hold(*args: Any) -> None:
        real_raise_marks(*args)
        inside.set()  # everything deleted and the mark raised; the transaction stays open
        release.wait(timeout=30)

    monkeypatch.setattr(retention, "_raise_marks", raise_marks_and_hold)
    purge = threading.Thread(target=retention.purge, args=(DAYS,))
    purge.start()
    try:
        assert inside.wait(timeout=10)
        accepted = send(client, headers)  # same tenant, same endpoint, while the purge holds its locks
        assert not release.is_set() and purge.is_alive()
    finally:
        release.set()
        purge.join(timeout=10)
    assert kept(accepted) and not any(kept(event) for event in old)
