"""Claims and records made in batches (the engine's group commit) keep every per-attempt rule."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from webhooks.delivery.claims import ClaimState, claim, claim_many
from webhooks.storage.db import database
from webhooks.storage.models import Alert, Attempt, Delivery, Endpoint, HealthChange
from webhooks.delivery.records import Outcome, record, record_many
from webhooks.storage.sqltext import COPY_FROM_ROWS
from webhooks.storage.timeutil import utcnow

from tests.api_helpers import HOOK_URL
from tests.delivery.claim_helpers import (
    LEASE,
    delivered_outcome,
    failed_outcome,
    messages_of,
    unstorable_outcome,
)


def test_a_batch_of_plain_ladder_attempts_is_leased_whole(tenant: SimpleNamespace) -> None:
    messages = messages_of(tenant, 5)

    claims = claim_many(messages, LEASE)

    assert [c.state for c in claims] == [ClaimState.CLAIMED] * 5
    assert all(c.endpoint is not None and c.endpoint.url == HOOK_URL for c in claims)
    assert Delivery.select().where(Delivery.lease_until.is_null(False)).count() == 5


def test_an_attempt_leased_by_an_earlier_batch_is_busy(tenant: SimpleNamespace) -> None:
    (message,) = messages_of(tenant, 1)

    first = claim_many([message], LEASE)
    second = claim_many([message], LEASE)

    assert [first[0].state, second[0].state] == [ClaimState.CLAIMED, ClaimState.BUSY]


def test_a_rate_limited_endpoint_is_throttled_once_its_bucket_is_empty(tenant: SimpleNamespace) -> None:
    messages = messages_of(tenant, 4)
    Endpoint.update(rate_limit=2).execute()

    claims = claim_many(messages, LEASE)

    assert [c.state for c in claims] == [ClaimState.CLAIMED] * 2 + [ClaimState.THROTTLED] * 2
    assert 0 < claims[2].wait <= 0.5


def test_a_resend_claims_a_finished_delivery_and_counts_its_earlier_resends(tenant: SimpleNamespace) -> None:
    (message,) = messages_of(tenant, 1)
    claim(message, LEASE)
    assert record(message, delivered_outcome(message), offline_after=5)
    Delivery.update(manual_attempts=2).execute()

    resend = message.next(attempt=2, trigger="resend")
    (claimed,) = claim_many([resend, message.next(attempt=2)], LEASE)[:1]

    assert claimed.state is ClaimState.CLAIMED and claimed.prior_status == "delivered"
    assert claimed.manual_attempts == 2


def test_a_delivery_twice_in_one_batch_is_claimed_once(tenant: SimpleNamespace) -> None:
    (message,) = messages_of(tenant, 1)

    claims = claim_many([message, message], LEASE)

    assert [claim.state for claim in claims] == [ClaimState.CLAIMED, ClaimState.BUSY]


def test_a_stale_message_in_a_batch_does_not_stop_the_others(tenant: SimpleNamespace) -> None:
    first, second = messages_of(tenant, 2)
    assert claim(first, LEASE).state is ClaimState.CLAIMED
    assert record(first, delivered_outcome(first), offline_after=5)

    claims = claim_many([first, second], LEASE)

    assert [claim.state for claim in claims] == [ClaimState.STALE, ClaimState.CLAIMED]


def test_records_in_one_batch_are_each_written_once_and_a_second_record_of_an_attempt_is_refused(
    tenant: SimpleNamespace,
) -> None:
    messages = messages_of(tenant, 3)
    claim_many(messages, LEASE)
    outcomes = [delivered_outcome(message) for message in messages]

    assert record_many(list(zip(messages, outcomes)), offline_after=5) == [True, True, True]
    again = record_many([(messages[0], delivered_outcome(messages[0])), (messages[1], outcomes[1])], offline_after=5)

    assert again == [False, True], "another worker's record is refused; our own (commit acknowledgement lost) is kept"
    assert Attempt.select().count() == 3
    assert {d.status for d in Delivery.select()} == {"delivered"}
    assert Delivery.select().where(Delivery.lease_until.is_null(False)).count() == 0
    rows = {row.id: row for row in Attempt.select()}
    assert rows[outcomes[0].attempt_id].request_headers == {"webhook-id": messages[0].event_id}


def test_while_parked_deliveries_are_released_an_old_retry_joins_them_instead_of_jumping_the_queue(
    tenant: SimpleNamespace,
) -> None:
    retry, released = messages_of(tenant, 2)
    claim(retry, LEASE)
    failed = delivered_outcome(retry)
    failed = Outcome(**{**failed.__dict__, "status": "retrying", "last_status_code": 500, "last_error": "HTTP 500"})
    assert record(retry, failed, offline_after=5)
    Endpoint.update(health="recovering").execute()

    claims = claim_many([retry.next(attempt=2), released], LEASE)

    assert [claim.state for claim in claims] == [ClaimState.PARKED, ClaimState.CLAIMED]
    assert Delivery.get_by_id(retry.delivery_id).status == "parked"


def test_an_item_that_breaks_a_constraint_does_not_sink_the_rest_of_its_batch(tenant: SimpleNamespace) -> None:
    good, bad = messages_of(tenant, 2)
    claim_many([good, bad], LEASE)

    recorded = record_many([(good, delivered_outcome(good)), (bad, unstorable_outcome(bad))], offline_after=5)

    assert recorded == [True, False]
    assert Delivery.get_by_id(good.delivery_id).status == "delivered"
    assert Delivery.get_by_id(bad.delivery_id).status == "pending", "nothing of the broken item was written"
    assert [row.delivery_id for row in Attempt.select()] == [good.delivery_id]


#: A batch this large is written with COPY on PostgreSQL (``sqltext.COPY_FROM_ROWS``).
LARGE_BATCH = COPY_FROM_ROWS + 4

#: Text that COPY's format must escape, and text that looks like its escapes.
AWKWARD_TEXTS = ["tab\there", "two\nlines\r\n", "back\\slash \\N \\.", "\\N", "", "naïve ☃ \ufffd", "end\\"]


def test_a_large_batch_stores_every_attempt_exactly_as_given_whatever_its_text_holds(tenant: SimpleNamespace) -> None:
    messages = messages_of(tenant, LARGE_BATCH)
    claim_many(messages, LEASE)
    outcomes = []
    for n, message in enumerate(messages):
        outcome = delivered_outcome(message)
        text = AWKWARD_TEXTS[n % len(AWKWARD_TEXTS)]
        fields = {**outcome.attempt_fields, "response_body": text if n % 3 else None, "duration_ms": n + 0.25,
                  "response_headers": {"x-note": text, "x-n": str(n)}, "url": f"{HOOK_URL}?q={n}"}
        outcomes.append(Outcome(**{**outcome.__dict__, "attempt_fields": fields}))

    assert record_many(list(zip(messages, outcomes)), offline_after=5) == [True] * LARGE_BATCH

    rows = {row.id: row for row in Attempt.select()}
    assert len(rows) == LARGE_BATCH
    for message, outcome in zip(messages, outcomes):
        row, given = rows[outcome.attempt_id], outcome.attempt_fields
        assert (row.delivery_id, row.event_id, row.endpoint_id, row.tenant_id) == (
            message.delivery_id, message.event_id, message.endpoint_id, message.tenant_id)
        assert (row.attempt_no, row.trigger, row.outcome) == (1, "ladder", "delivered")
        assert row.response_body == given["response_body"]
        assert row.response_headers == given["response_headers"]
        assert row.request_headers == given["request_headers"]
        assert (row.url, row.duration_ms, row.response_status, row.error) == (given["url"], given["duration_ms"], 200, None)
        assert abs((row.started_at - given["started_at"]).total_seconds()) < 1e-3
        assert row.next_attempt_at is None


def test_an_item_that_breaks_a_constraint_does_not_sink_the_rest_of_a_large_batch(tenant: SimpleNamespace) -> None:
    *good, bad = messages_of(tenant, LARGE_BATCH)
    claim_many([*good, bad], LEASE)

    recorded = record_many([*((m, delivered_outcome(m)) for m in good), (bad, unstorable_outcome(bad))], offline_after=5)

    assert recorded == [True] * len(good) + [False]
    assert Delivery.get_by_id(bad.delivery_id).status == "pending", "nothing of the broken item was written"
    assert sorted(row.delivery_id for row in Attempt.select()) == sorted(m.delivery_id for m in good)


def test_a_batch_updates_its_deliveries_in_id_order_whatever_order_its_messages_came_in(
    tenant: SimpleNamespace, monkeypatch: Any,
) -> None:
    # Two batches locking the same rows in different orders deadlock; the outbox mark walks ids in order.
    messages = list(reversed(messages_of(tenant, 4)))
    ids_bound: list[list[str]] = []
    real_execute = database.obj.execute_sql

    def watching(sql: str, params: Any = None, *args: Any, **kwargs: Any) -> Any:
        if ("WITH v(" in sql or "EXECUTE " in sql) and not sql.startswith("PREPARE"):  # run, prepared or not
            ids_bound.append([value for value in params or () if isinstance(value, str) and value.startswith("dlv_")])
        return real_execute(sql, params, *args, **kwargs)

    monkeypatch.setattr(database.obj, "execute_sql", watching)
    claim_many(messages, LEASE)
    record_many([(message, delivered_outcome(message)) for message in messages], offline_after=5)

    assert len(ids_bound) == 2, "one lease and one advance, each a single statement"
    assert all(ids == sorted(ids) and len(ids) == 4 for ids in ids_bound)


def prepared_here() -> set[str]:
    return {name for (name,) in database.execute_sql("SELECT name FROM pg_prepared_statements").fetchall()}


@pytest.mark.postgresql  # prepared statements are used on PostgreSQL only
def test_one_delivery_leases_and_records_run_as_statements_each_connection_prepares_once(
    tenant: SimpleNamespace,
) -> None:
    messages = messages_of(tenant, 7)
    database.execute_sql("DEALLOCATE ALL")  # nothing of the set-up's

    for message in messages[:2]:  # at low load a batch is one delivery
        assert claim_many([message], LEASE)[0].state is ClaimState.CLAIMED
        assert record_many([(message, delivered_outcome(message))], offline_after=5) == [True]
    assert [c.state for c in claim_many(messages[2:], LEASE)] == [ClaimState.CLAIMED] * 5  # planned afresh

    assert {"claim_lease_1", "record_advance_1"} <= prepared_here()
    assert not any(name.startswith("claim_lease_") and name != "claim_lease_1" for name in prepared_here())
    assert Attempt.select().count() == 2 and Delivery.select().where(Delivery.status == "delivered").count() == 2


@pytest.mark.postgresql  # prepared statements are used on PostgreSQL only
def test_a_prepared_lease_or_record_that_vanished_is_run_again_unprepared_and_prepared_anew(
    tenant: SimpleNamespace,
) -> None:
    first, second = messages_of(tenant, 2)
    claim_many([first], LEASE)
    record_many([(first, delivered_outcome(first))], offline_after=5)
    database.execute_sql("DEALLOCATE ALL")  # what DISCARD ALL or a pooler would do

    assert claim_many([second], LEASE)[0].state is ClaimState.CLAIMED
    assert record_many([(second, delivered_outcome(second))], offline_after=5) == [True]

    assert Attempt.select().count() == 2
    assert {d.status for d in Delivery.select()} == {"delivered"}
    claim_many([first], LEASE)  # and the next small batch prepares them again
    assert "claim_lease_1" in prepared_here()


def _endpoint_updates(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The UPDATE statements on the endpoint table run from now on (their SQL)."""
    seen: list[str] = []
    target = database.obj  # the Proxy's database
    execute_sql = target.execute_sql

    def counting(sql: str, *args: Any, **kwargs: Any) -> Any:
        if sql.lstrip().upper().startswith("UPDATE") and '"endpoint"' in sql.split("SET")[0]:
            seen.append(sql)
        return execute_sql(sql, *args, **kwargs)

    monkeypatch.setattr(target, "execute_sql", counting)
    return seen


def _record_failures(tenant: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, count: int,
                     offline_after: int) -> list[str]:
    """``count`` failed first attempts to one endpoint, claimed and recorded in one batch; the
    endpoint UPDATEs the record ran."""
    messages = messages_of(tenant, count)
    claim_many(messages, LEASE)
    updates = _endpoint_updates(monkeypatch)
    assert record_many([(message, failed_outcome(message)) for message in messages], offline_after) == [True] * count
    return updates


def test_a_batch_of_failures_to_one_endpoint_counts_every_one_and_writes_its_row_once(
    tenant: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    updates = _record_failures(tenant, monkeypatch, 6, offline_after=100)

    endpoint = Endpoint.get()
    assert endpoint.consecutive_failures == 6
    assert endpoint.failing_since is not None and endpoint.health == "online"
    assert len(updates) == 1, "six failures, one write of the endpoint's row"


def test_an_endpoint_goes_offline_inside_a_batch_at_its_threshold_and_a_success_later_in_it_brings_it_back(
    tenant: SimpleNamespace,
) -> None:
    messages = messages_of(tenant, 5)
    claim_many(messages, LEASE)
    outcomes = [failed_outcome(message) for message in messages[:4]] + [delivered_outcome(messages[4])]

    record_many(list(zip(messages, outcomes)), offline_after=3)

    changes = [(change.from_state, change.to_state) for change in HealthChange.select().order_by(HealthChange.id)]
    assert changes == [("online", "offline"), ("offline", "online")]
    assert [alert.kind for alert in Alert.select().order_by(Alert.id)] == ["endpoint.offline", "endpoint.online"]
    offline_reason = HealthChange.select().order_by(HealthChange.id).first().reason
    assert offline_reason.startswith("3 consecutive failures")
    endpoint = Endpoint.get()
    assert (endpoint.health, endpoint.consecutive_failures, endpoint.failing_since) == ("online", 0, None)
    assert endpoint.last_success_at is not None and endpoint.offline_since is None


def test_a_state_change_inside_a_batch_writes_the_counts_set_before_it_in_the_same_update(
    tenant: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    updates = _record_failures(tenant, monkeypatch, 5, offline_after=3)

    endpoint = Endpoint.get()
    assert (endpoint.health, endpoint.consecutive_failures) == ("offline", 5)
    assert len(updates) == 2, "one UPDATE going offline at the third failure, one for the two after it"


def test_a_probe_is_only_for_an_offline_endpoint_and_the_ladder_parks_every_delivery_of_one(
    tenant: SimpleNamespace
) -> None:
    first, second = messages_of(tenant, 2)
    Endpoint.update(health="offline", offline_since=utcnow(), probe_delivery_id=first.delivery_id).execute()

    (ladder,) = claim_many([first], LEASE)  # the delivery the last probe was made with parks too
    (probe,) = claim_many([second.next(trigger="probe")], LEASE)
    Endpoint.update(health="recovering").execute()
    (late,) = claim_many([first.next(trigger="probe")], LEASE)

    assert ladder.state is ClaimState.PARKED and Delivery.get_by_id(first.delivery_id).status == "parked"
    assert probe.state is ClaimState.CLAIMED
    assert late.state is ClaimState.STALE  # back: the release sends what is parked, in order
