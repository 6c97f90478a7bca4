"""Storing an event on the hot path: atomic rate limit, contiguous seq, idempotency, all or nothing.

On PostgreSQL ``store_event`` runs as two round trips with explicit BEGIN/COMMIT; on
SQLite, or inside a caller's transaction, as single statements in ``write()``. These
tests hold both to the same promises (the suite runs on both databases).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any, Callable

import peewee
import pytest
from flask.testing import FlaskClient

from tests import concurrency
from tests.api_helpers import create_endpoint, post_event
from webhooks.ingest import accept as ingest
from webhooks.ingest import plan
from webhooks.storage import db, ingest_sql
from webhooks.api.events import accepted_body
from webhooks.storage.db import write
from webhooks.storage.models import Delivery, Event, IdempotencyKey, Tenant
from webhooks.storage.pg_prepared import PreparedStatements
from webhooks.api.schemas import EventSchema
from webhooks.storage.timeutil import utcnow

PAYLOAD = {"order": {"id": 7, "lines": [1, 2, 3]}}


class FrozenClock:
    """``ingest.utcnow`` standing still (or moved by hand), so the bucket cannot refill by itself."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 22, 12, 0, 0)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> FrozenClock:
    clock = FrozenClock()
    monkeypatch.setattr(ingest, "utcnow", clock)
    return clock


def in_threads(count: int, work: Callable[[int], Any]) -> list[Any]:
    """``tests.concurrency.in_threads``, each thread giving its pooled connection back."""
    return concurrency.in_threads(count, work, cleanup=db.database.close)


def tenant_row(tenant: SimpleNamespace) -> Tenant:
    return Tenant.get_by_id(tenant.id)


# --- the rate limit ------------------------------------------------------------------------


def test_concurrent_requests_spend_exactly_the_tokens_in_the_bucket(
    tenant: SimpleNamespace, frozen: FrozenClock
) -> None:
    row = tenant_row(tenant)

    results = in_threads(20, lambda i: ingest.store_event(row, "order.created", {"n": i}, None, rate_limit=5.0))

    accepted = [r for r in results if isinstance(r, ingest.Accepted)]
    refused = [r for r in results if isinstance(r, ingest.RateLimited)]
    assert (len(accepted), len(refused)) == (5, 15)
    assert sorted(a.event.seq for a in accepted) == [1, 2, 3, 4, 5]
    assert Event.select().count() == 5
    after = tenant_row(tenant)
    assert (after.event_seq, after.ingest_tokens) == (5, 0.0)


def test_the_bucket_refills_at_the_rate_and_says_when_to_retry(tenant: SimpleNamespace, frozen: FrozenClock) -> None:
    row = tenant_row(tenant)
    store = lambda: ingest.store_event(row, "order.created", PAYLOAD, None, rate_limit=2.0)  # noqa: E731
    store(), store()
    with pytest.raises(ingest.RateLimited) as refused:
        store()
    assert refused.value.retry_after == pytest.approx(0.5)

    frozen.now += timedelta(seconds=0.5)  # one token back

    assert store().event.seq == 3
    with pytest.raises(ingest.RateLimited):
        store()
    frozen.now += timedelta(seconds=10)  # refilled, but never beyond one second's worth
    assert [store().event.seq for _ in range(2)] == [4, 5]
    with pytest.raises(ingest.RateLimited):
        store()


def test_a_refused_event_writes_nothing_and_uses_no_seq(tenant: SimpleNamespace, frozen: FrozenClock) -> None:
    row = tenant_row(tenant)
    ingest.store_event(row, "order.created", PAYLOAD, None, rate_limit=1.0)

    with pytest.raises(ingest.RateLimited):
        ingest.store_event(row, "order.created", PAYLOAD, "key-1", rate_limit=1.0)

    assert (Event.select().count(), IdempotencyKey.select().count()) == (1, 0)
    frozen.now += timedelta(seconds=1)
    assert ingest.store_event(row, "order.created", PAYLOAD, None, rate_limit=1.0).event.seq == 2


def test_events_making_more_deliveries_than_events_spend_a_token_per_delivery(
    client: FlaskClient, headers: dict[str, str], tenant: SimpleNamespace, frozen: FrozenClock
) -> None:
    """A fan-out is paid for by what it makes: 3 endpoints, so one event costs 3 tokens."""
    for _ in range(3):
        create_endpoint(client, headers, event_types=["order.created"])
    row = tenant_row(tenant)

    ingest.store_event(row, "order.created", PAYLOAD, None, rate_limit=5.0)
    assert tenant_row(tenant).ingest_tokens == 2.0
    with pytest.raises(ingest.RateLimited) as refused:
        ingest.store_event(row, "order.created", PAYLOAD, None, rate_limit=5.0)

    assert refused.value.retry_after == pytest.approx(0.2)  # one token short, at 5 per second
    assert (Event.select().count(), Delivery.select().count()) == (1, 3)
    ingest.store_events(row, [ingest.NewEvent("order.shipped", {}), ingest.NewEvent("order.shipped", {})],
                        rate_limit=5.0)  # no endpoint wants them: a token per event
    assert tenant_row(tenant).ingest_tokens == 0.0


def test_a_batch_making_more_deliveries_than_the_bucket_holds_is_refused_before_anything_is_written(
    client: FlaskClient, headers: dict[str, str], tenant: SimpleNamespace, frozen: FrozenClock
) -> None:
    for _ in range(3):
        create_endpoint(client, headers)
    row = tenant_row(tenant)

    with pytest.raises(ingest.BatchOverRateLimit) as refused:
        ingest.store_events(row, batch(2), rate_limit=5.0)

    assert str(refused.value).startswith("2 events make 6 deliveries, more than the tenant's rate limit allows at once")
    assert (Event.select().count(), Delivery.select().count()) == (0, 0)
    assert tenant_row(tenant).event_seq == 0


def test_without_a_limit_the_bucket_is_left_alone(tenant: SimpleNamespace) -> None:
    ingest.store_event(tenant_row(tenant), "order.created", PAYLOAD, None)

    after = tenant_row(tenant)
    assert (after.event_seq, after.ingest_tokens, after.ingest_updated_at) == (1, None, None)


# --- seq and deliveries ---------------------------------------------------------------------


def test_concurrent_events_get_contiguous_unique_seqs(client: FlaskClient, headers: dict[str, str],
                                                     tenant: SimpleNamespace) -> None:
    create_endpoint(client, headers)
    row = tenant_row(tenant)

    results = in_threads(4, lambda i: [ingest.store_event(row, "order.created", {"n": i}, None) for _ in range(10)])

    seqs = sorted(accepted.event.seq for result in results for accepted in result)
    assert seqs == list(range(1, 41))
    assert Delivery.select().count() == 40


def test_deliveries_follow_subscriptions_and_parking(client: FlaskClient, headers: dict[str, str],
                                                     tenant: SimpleNamespace) -> None:
    everything = create_endpoint(client, headers)["id"]
    orders = create_endpoint(client, headers, event_types=["order.created"])["id"]
    create_endpoint(client, headers, event_types=["invoice.paid"])
    offline = create_endpoint(client, headers)["id"]
    deleted = create_endpoint(client, headers)["id"]
    client.delete(f"/v1/endpoints/{deleted}", headers=headers)
    from webhooks.storage.models import Endpoint

    Endpoint.update(health="offline").where(Endpoint.id == offline).execute()

    accepted = ingest.store_event(tenant_row(tenant), "order.created", PAYLOAD, None, exclude_endpoint=orders)

    by_endpoint = {d.endpoint_id: d for d in accepted.deliveries}
    assert set(by_endpoint) == {everything, offline}
    assert by_endpoint[everything].status == "pending" and by_endpoint[everything].next_attempt_at is not None
    assert by_endpoint[offline].status == "parked" and by_endpoint[offline].next_attempt_at is None
    stored = {d.id: (d.endpoint_id, d.status, d.attempts, d.enqueued_at) for d in Delivery.select()}
    assert stored == {d.id: (d.endpoint_id, d.status, 0, None) for d in accepted.deliveries}
    event = Event.get_by_id(accepted.event.id)
    assert (event.seq, event.payload, event.tenant_id) == (1, PAYLOAD, tenant.id)


@pytest.mark.parametrize("inside_a_transaction", [False, True])
def test_a_failing_statement_leaves_nothing_half_written(
    client: FlaskClient, headers: dict[str, str], tenant: SimpleNamespace, monkeypatch: pytest.MonkeyPatch,
    inside_a_transaction: bool, request: pytest.FixtureRequest,
) -> None:
    create_endpoint(client, headers)
    row = tenant_row(tenant)
    real = plan.insert_deliveries_sql
    request.addfinalizer(ingest_sql.postgres_write_sql.cache_clear)  # no broken text left cached

    def broken(dialect: object, count: int) -> str:
        return real(dialect, count).replace('"delivery"', '"no_such_table"')

    monkeypatch.setattr(ingest, "prepared", PreparedStatements(enabled=False))  # run the broken text itself
    monkeypatch.setattr(plan, "insert_deliveries_sql", broken)  # SQLite's statements, and PostgreSQL's ...
    monkeypatch.setattr(ingest_sql, "insert_deliveries_sql", broken)  # ... single statement
    ingest_sql.postgres_write_sql.cache_clear()

    with pytest.raises(peewee.DatabaseError):
        if inside_a_transaction:
            with write():
                ingest.store_event(row, "order.created", PAYLOAD, "key-1", rate_limit=100.0)
        else:
            ingest.store_event(row, "order.created", PAYLOAD, "key-1", rate_limit=100.0)

    assert not db.database.in_transaction()
    after = tenant_row(tenant)
    assert (Event.select().count(), IdempotencyKey.select().count(), Delivery.select().count()) == (0, 0, 0)
    assert (after.event_seq, after.ingest_tokens) == (0, None)
    monkeypatch.undo()
    ingest_sql.postgres_write_sql.cache_clear()
    assert ingest.store_event(row, "order.created", PAYLOAD, "key-1").event.seq == 1


def test_an_operational_event_stored_inside_a_transaction_commits_with_it(
    client: FlaskClient, headers: dict[str, str], tenant: SimpleNamespace
) -> None:
    create_endpoint(client, headers, event_types=["endpoint.offline"])
    with write():
        accepted = ingest.store_event(tenant_row(tenant), "endpoint.offline", {"endpoint_id": "ep_x"}, None)
        assert db.database.in_transaction()

    assert Event.get_by_id(accepted.event.id).seq == 1
    assert len(accepted.deliveries) == 1


def test_an_unknown_tenant_is_an_error(database_url: str) -> None:
    ghost = Tenant(id="ten_01jd3k00000000000000000000", name="ghost")

    with pytest.raises(ingest.UnknownTenant):
        ingest.store_event(ghost, "order.created", PAYLOAD, None)


# --- idempotency ------------------------------------------------------------------------------


def test_the_same_key_at_the_same_time_makes_one_event(client: FlaskClient, headers: dict[str, str],
                                                       tenant: SimpleNamespace) -> None:
    create_endpoint(client, headers)
    row = tenant_row(tenant)

    results = in_threads(6, lambda i: ingest.store_event(row, "order.created", PAYLOAD, "same-key"))

    assert all(isinstance(r, ingest.Accepted) for r in results), results
    assert len({r.event.id for r in results}) == 1
    assert sorted(r.replayed for r in results) == [False] + [True] * 5
    assert (Event.select().count(), Delivery.select().count()) == (1, 1)


def test_an_expired_key_may_be_used_afresh(client: FlaskClient, headers: dict[str, str]) -> None:
    first = post_event(client, headers, idempotency_key="k1").json
    IdempotencyKey.update(created_at=utcnow() - timedelta(hours=25)).execute()

    again = post_event(client, headers, payload={"other": True}, idempotency_key="k1")

    assert again.status_code == 202 and "Idempotent-Replayed" not in again.headers
    assert again.json["id"] != first["id"] and again.json["seq"] == 2
    assert IdempotencyKey.get().event_id == again.json["id"]


def test_a_replay_answers_exactly_like_the_first_time(client: FlaskClient, headers: dict[str, str]) -> None:
    create_endpoint(client, headers)
    first = post_event(client, headers, idempotency_key="k1")

    again = post_event(client, headers, idempotency_key="k1")

    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json == first.json


# --- the answer ---------------------------------------------------------------------------------


def test_the_answer_is_what_the_documented_schema_would_dump(client: FlaskClient, headers: dict[str, str],
                                                              tenant: SimpleNamespace) -> None:
    create_endpoint(client, headers)
    create_endpoint(client, headers)
    accepted = ingest.store_event(tenant_row(tenant), "order.created", PAYLOAD, "k1")
    replayed = ingest.store_event(tenant_row(tenant), "order.created", PAYLOAD, "k1")

    for result in (accepted, replayed):
        event = result.event
        event.deliveries = result.deliveries  # as the view hands it to the schema
        assert accepted_body(result.event, result.deliveries) == EventSchema().dump(event)
    assert replayed.replayed and accepted_body(accepted.event, accepted.deliveries) == accepted_body(
        replayed.event, replayed.deliveries)


# --- prepared statements (PostgreSQL) ------------------------------------------------------------


def prepared_here() -> set[str]:
    return {name for (name,) in db.database.execute_sql("SELECT name FROM pg_prepared_statements").fetchall()}


@pytest.mark.postgresql  # prepared statements are used on PostgreSQL only
def test_each_connection_prepares_the_hot_statements_once(
    database_url: str, client: FlaskClient, headers: dict[str, str], tenant: SimpleNamespace
) -> None:
    create_endpoint(client, headers)
    row = tenant_row(tenant)

    first = ingest.store_event(row, "order.created", PAYLOAD, None, rate_limit=100.0)
    second = ingest.store_event(row, "order.created", PAYLOAD, "k1", rate_limit=100.0)

    expected = {"ingest_read_0", "ingest_read_1", "ingest_write_10_1", "ingest_write_11_1"}
    assert expected <= prepared_here()
    assert (first.event.seq, second.event.seq) == (1, 2)
    assert Delivery.select().count() == 2


@pytest.mark.postgresql  # prepared statements are used on PostgreSQL only
def test_statements_that_vanished_are_prepared_again_without_a_duplicate_event(
    database_url: str, client: FlaskClient, headers: dict[str, str], tenant: SimpleNamespace
) -> None:
    create_endpoint(client, headers)
    row = tenant_row(tenant)
    ingest.store_event(row, "order.created", PAYLOAD, None)
    ingest.store_event(row, "order.created", PAYLOAD, None)
    db.database.execute_sql("DEALLOCATE ALL")  # what DISCARD ALL or a pooler would do

    assert ingest.store_event(row, "order.created", PAYLOAD, None).event.seq == 3

    assert sorted(e.seq for e in Event.select()) == [1, 2, 3]
    assert {"ingest_read_0", "ingest_write_00_1"} <= prepared_here()


@pytest.mark.postgresql  # prepared statements are used on PostgreSQL only
def test_prepared_statements_can_be_turned_off(
    database_url: str, client: FlaskClient, headers: dict[str, str], tenant: SimpleNamespace,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    create_endpoint(client, headers)
    db.database.execute_sql("DEALLOCATE ALL")
    monkeypatch.setattr(ingest, "prepared", PreparedStatements(enabled=False))

    accepted = [ingest.store_event(tenant_row(tenant), "order.created", PAYLOAD, None) for _ in range(2)]

    assert [a.event.seq for a in accepted] == [1, 2]
    assert not {name for name in prepared_here() if name.startswith("ingest_")}


# --- batches ------------------------------------------------------------------------------------


def batch(n: int, prefix: str = "", keyed: bool = False) -> list[ingest.NewEvent]:
    return [ingest.NewEvent("order.created", {"n": i}, f"{prefix}{i}" if keyed else None) for i in range(n)]


def test_concurrent_batches_each_get_consecutive_seqs_in_list_order(
    client: FlaskClient, headers: dict[str, str], tenant: SimpleNamespace
) -> None:
    create_endpoint(client, headers)
    row = tenant_row(tenant)

    results = in_threads(4, lambda i: ingest.store_events(row, batch(10)))

    for accepted in results:
        seqs = [a.event.seq for a in accepted]
        assert seqs == list(range(seqs[0], seqs[0] + 10))
        assert [a.event.payload for a in accepted] == [{"n": i} for i in range(10)]
    assert sorted(a.event.seq for accepted in results for a in accepted) == list(range(1, 41))
    assert Delivery.select().count() == 40


def test_a_refused_batch_writes_nothing_and_spends_no_token(tenant: SimpleNamespace, frozen: FrozenClock) -> None:
    row = tenant_row(tenant)
    ingest.store_events(row, batch(6), rate_limit=10.0)

    with pytest.raises(ingest.RateLimited) as refused:
        ingest.store_events(row, batch(5, keyed=True), rate_limit=10.0)

    assert refused.value.retry_after == pytest.approx(0.1)  # one token short, at 10 per second
    assert (Event.select().count(), IdempotencyKey.select().count()) == (6, 0)
    assert [a.event.seq for a in ingest.store_events(row, batch(4), rate_limit=10.0)] == [7, 8, 9, 10]


def test_replayed_items_spend_no_token(tenant: SimpleNamespace, frozen: FrozenClock) -> None:
    row = tenant_row(tenant)
    ingest.store_events(row, batch(3, keyed=True), rate_limit=5.0)

    again = ingest.store_events(row, [*batch(3, keyed=True), *batch(2, prefix="new", keyed=True)], rate_limit=5.0)

    assert [a.replayed for a in again] == [True, True, True, False, False]
    assert tenant_row(tenant).ingest_tokens == 0.0


def test_the_same_keys_in_concurrent_batches_make_one_event_each(
    client: FlaskClient, headers: dict[str, str], tenant: SimpleNamespace
) -> None:
    create_endpoint(client, headers)
    row = tenant_row(tenant)

    results = in_threads(4, lambda i: ingest.store_events(row, batch(5, keyed=True)))

    assert all(isinstance(r, list) for r in results), results
    assert {tuple(a.event.id for a in accepted) for accepted in results} == {tuple(a.event.id for a in results[0])}
    assert sorted(a.replayed for accepted in results for a in accepted) == [False] * 5 + [True] * 15
    assert (Event.select().count(), Delivery.select().count()) == (5, 5)


def test_an_expired_key_in_a_batch_is_used_afresh(tenant: SimpleNamespace) -> None:
    row = tenant_row(tenant)
    first = ingest.store_events(row, batch(2, keyed=True))
    IdempotencyKey.update(created_at=utcnow() - timedelta(hours=25)).where(IdempotencyKey.key == "0").execute()

    again = ingest.store_events(row, [ingest.NewEvent("order.created", {"other": 1}, "0"), *batch(2, keyed=True)[1:]])

    assert (again[0].replayed, again[1].replayed) == (False, True)
    assert again[0].event.id != first[0].event.id and again[0].event.seq == 3
    assert IdempotencyKey.get(IdempotencyKey.key == "0").event_id == again[0].event.id
