"""After the 202: the background enqueuer publishes accepted deliveries in batches and marks them.

Publishes start at most once every ``spacing`` seconds: messages arriving within it of
the previous publish share the next one (one wait for all of their confirms) and one
outbox mark, and a message after a quieter spell goes out at once. Only what the broker confirmed is marked; the relay
republishes the rest. While idle the thread gives its pooled connection back.
"""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any, Sequence

import psycopg2
import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.api_helpers import create_endpoint, post_event
from tests.conftest import queue_messages, wait_until
from webhooks.storage import db
from webhooks.config import Settings
from webhooks.storage.db import write
from webhooks.messaging.messages import DeliveryMessage
from webhooks.storage.models import Delivery
from webhooks.storage.timeutil import utcnow
from webhooks.messaging.enqueuer import BackgroundEnqueuer
from webhooks.messaging.outbox import mark_enqueued
from webhooks.messaging.publisher import Outgoing
from webhooks.messaging.shares import BULK_AFTER, RecentShares


class RecordingPublisher:
    """Confirms the first ``confirm`` messages of each batch (all by default) and remembers the batches."""

    def __init__(self, confirm: int | None = None) -> None:
        self.batches: list[list[Outgoing]] = []
        self.confirm = confirm
        self.lock = threading.Lock()

    def publish(self, messages: Sequence[Outgoing]) -> int:
        with self.lock:
            self.batches.append(list(messages))
        return len(messages) if self.confirm is None else min(self.confirm, len(messages))


def use_enqueuer(app: Flask, settings: Settings, publisher: Any, **options: Any) -> BackgroundEnqueuer:
    enqueuer = BackgroundEnqueuer(publisher, settings.topology, **options)
    app.extensions["webhooks.enqueuer"] = enqueuer
    return enqueuer


def test_accepted_deliveries_are_published_and_marked(
    client: FlaskClient, headers: dict[str, str], app: Flask, settings: Settings
) -> None:
    create_endpoint(client, headers)
    create_endpoint(client, headers)

    accepted = post_event(client, headers).json

    assert app.extensions["webhooks.enqueuer"].wait_idle(10)
    ids = {d["id"] for d in accepted["deliveries"]}
    assert all(Delivery.get_by_id(i).enqueued_at is not None for i in ids)
    published = {DeliveryMessage.decode(body, headers).delivery_id for body, headers in queue_messages(settings.topology.primary)}
    assert published == ids


def test_under_sustained_load_events_accepted_within_the_spacing_share_one_publish_and_one_mark(
    client: FlaskClient, headers: dict[str, str], app: Flask, settings: Settings
) -> None:
    create_endpoint(client, headers)
    publisher = RecordingPublisher()
    enqueuer = use_enqueuer(app, settings, publisher, spacing=2.0)
    post_event(client, headers)
    assert enqueuer.wait_idle(10)  # the first, after a pause, went out at once

    ids = [post_event(client, headers).json["deliveries"][0]["id"] for _ in range(3)]  # right behind it

    assert enqueuer.wait_idle(10)
    assert [len(batch) for batch in publisher.batches] == [1, 3]
    assert all(Delivery.get_by_id(i).enqueued_at is not None for i in ids)


def test_rounds_published_within_the_mark_interval_are_marked_together_once_it_has_passed(
    client: FlaskClient, headers: dict[str, str], app: Flask, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from webhooks.messaging import enqueuer as module

    clock = SimpleNamespace(now=1000.0)
    monkeypatch.setattr(module, "time", SimpleNamespace(monotonic=lambda: clock.now))  # the enqueuer's clock only
    marks: list[int] = []
    real = module.mark_enqueued
    monkeypatch.setattr(module, "mark_enqueued", lambda messages: (marks.append(len(messages)), real(messages)))
    create_endpoint(client, headers)
    publisher = RecordingPublisher()
    enqueuer = use_enqueuer(app, settings, publisher, spacing=0.0, mark_every=1.0)
    post_event(client, headers)
    assert enqueuer.wait_idle(10)  # the first mark after a quiet spell is made at once

    ids = []
    for _ in range(3):  # three rounds, each published as soon as its event is accepted
        ids.append(post_event(client, headers).json["deliveries"][0]["id"])
        wait_until(lambda: sum(map(len, publisher.batches)) == len(ids) + 1, timeout=5)
    assert not enqueuer.wait_idle(0.2)  # published, not marked: the interval has not passed
    assert marks == [1]

    clock.now += 1.5  # no fourth event comes: the mark falls due on its own

    assert enqueuer.wait_idle(10)
    assert [len(batch) for batch in publisher.batches] == [1, 1, 1, 1]
    assert marks == [1, 3]
    assert all(Delivery.get_by_id(i).enqueued_at is not None for i in ids)


def test_after_a_pause_the_first_message_does_not_wait_for_company(
    client: FlaskClient, headers: dict[str, str], app: Flask, settings: Settings
) -> None:
    create_endpoint(client, headers)
    publisher = RecordingPublisher()
    enqueuer = use_enqueuer(app, settings, publisher, spacing=5.0)

    started = time.monotonic()
    post_event(client, headers)
    assert enqueuer.wait_idle(10)

    assert time.monotonic() - started < 2.0
    assert [len(batch) for batch in publisher.batches] == [1]


def test_only_what_the_broker_confirmed_is_marked(
    client: FlaskClient, headers: dict[str, str], app: Flask, settings: Settings
) -> None:
    create_endpoint(client, headers)
    enqueuer = use_enqueuer(app, settings, RecordingPublisher(confirm=2), spacing=2.0)
    enqueuer._last_batch_start = time.monotonic()  # as under sustained load: the three share a batch

    ids = [post_event(client, headers).json["deliveries"][0]["id"] for _ in range(3)]

    assert enqueuer.wait_idle(10)
    marked = [Delivery.get_by_id(i).enqueued_at is not None for i in ids]
    assert marked == [True, True, False]  # the third is the relay's


def test_a_failing_publisher_leaves_everything_to_the_relay(
    client: FlaskClient, headers: dict[str, str], app: Flask, settings: Settings
) -> None:
    create_endpoint(client, headers)

    class Exploding:
        def publish(self, messages: Sequence[Outgoing]) -> int:
            raise RuntimeError("boom")

    enqueuer = use_enqueuer(app, settings, Exploding())

    response = post_event(client, headers)

    assert response.status_code == 202
    assert enqueuer.wait_idle(10)
    assert Delivery.get_by_id(response.json["deliveries"][0]["id"]).enqueued_at is None


@pytest.mark.postgresql  # SQLite has no pool
def test_the_enqueuer_gives_its_connection_back_when_idle(
    client: FlaskClient, headers: dict[str, str], app: Flask, settings: Settings
) -> None:
    create_endpoint(client, headers)
    enqueuer = use_enqueuer(app, settings, RecordingPublisher(), release_after=0.2)
    pool = db.database.obj
    baseline = len(pool._in_use)

    post_event(client, headers)
    assert enqueuer.wait_idle(10)

    wait_until(lambda: len(pool._in_use) <= baseline, timeout=5)


def _message(delivery: Delivery, attempt: int) -> DeliveryMessage:
    return DeliveryMessage(delivery.id, delivery.event_id, delivery.endpoint_id, delivery.tenant_id, "order.created",
                           "", {}, attempt=attempt)


@pytest.mark.parametrize("inside_a_transaction", [False, True])
def test_a_mark_applies_only_to_the_attempt_it_was_published_for(
    client: FlaskClient, headers: dict[str, str], app: Flask, settings: Settings, inside_a_transaction: bool
) -> None:
    create_endpoint(client, headers)
    use_enqueuer(app, settings, RecordingPublisher(confirm=0))  # nothing marked by the request itself
    first, second, third = (Delivery.get_by_id(post_event(client, headers).json["deliveries"][0]["id"])
                            for _ in range(3))
    Delivery.update(attempts=1).where(Delivery.id == second.id).execute()  # moved on since

    messages = [_message(first, 1), _message(second, 1), _message(third, 2)]
    if inside_a_transaction:
        with write():
            mark_enqueued(messages)
    else:
        mark_enqueued(messages)

    assert [Delivery.get_by_id(d.id).enqueued_at is not None for d in (first, second, third)] == [True, False, False]
    assert not db.database.in_transaction()


@pytest.mark.postgresql
def test_a_mark_is_one_round_trip_on_postgresql(
    client: FlaskClient, headers: dict[str, str], app: Flask, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_endpoint(client, headers)
    use_enqueuer(app, settings, RecordingPublisher(confirm=0))
    deliveries = [Delivery.get_by_id(post_event(client, headers).json["deliveries"][0]["id"]) for _ in range(3)]
    Delivery.update(attempts=1).where(Delivery.id == deliveries[2].id).execute()
    statements: list[str] = []
    original = db.database.obj.execute_sql
    monkeypatch.setattr(db.database.obj, "execute_sql",
                        lambda sql, params=None: statements.append(sql) or original(sql, params))

    mark_enqueued([_message(deliveries[0], 1), _message(deliveries[1], 1), _message(deliveries[2], 2)])

    assert len(statements) == 1
    assert all(Delivery.get_by_id(d.id).enqueued_at is not None for d in deliveries)


class GatedPublisher(RecordingPublisher):
    """Holds its first batch until ``release`` is set (a publish under way while more queues)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered, self.release = threading.Event(), threading.Event()

    def publish(self, messages: Sequence[Outgoing]) -> int:
        if not self.batches:
            self.entered.set()
            self.release.wait(10)
        return super().publish(messages)


def test_queued_events_are_published_tenant_by_tenant_so_one_event_does_not_wait_behind_a_flood(
    app: Flask, settings: Settings
) -> None:
    publisher = GatedPublisher()
    enqueuer = use_enqueuer(app, settings, publisher, spacing=0.0)

    def message(tenant: str, n: int) -> DeliveryMessage:
        return DeliveryMessage(f"dlv_{tenant}_{n}", f"evt_{n}", "ep_1", tenant, "order.created", "t", {"n": n})

    enqueuer.submit([message("ten_a", 0)])  # published first, held
    assert publisher.entered.wait(5)
    enqueuer.submit([message("ten_a", n) for n in range(1, 5)])
    enqueuer.submit([message("ten_b", 0)])
    publisher.release.set()

    assert enqueuer.wait_idle(10)
    second = [DeliveryMessage.decode(body, headers).delivery_id for _, body, headers in publisher.batches[1]]
    assert second == ["dlv_ten_a_1", "dlv_ten_b_0", "dlv_ten_a_2", "dlv_ten_a_3", "dlv_ten_a_4"]


def test_an_event_queued_behind_more_than_a_batch_of_another_tenant_s_goes_out_in_the_next_batch(
    app: Flask, settings: Settings
) -> None:
    publisher = GatedPublisher()
    enqueuer = use_enqueuer(app, settings, publisher, spacing=0.0, batch=3)

    def message(tenant: str, n: int) -> DeliveryMessage:
        return DeliveryMessage(f"dlv_{tenant}_{n}", f"evt_{n}", "ep_1", tenant, "order.created", "t", {"n": n})

    enqueuer.submit([message("ten_a", 0)])  # published first, held
    assert publisher.entered.wait(5)
    enqueuer.submit([message("ten_a", n) for n in range(1, 9)])  # eight of a's: more than two batches
    enqueuer.submit([message("ten_b", 0)])
    enqueuer.submit([message("ten_b", 1)])  # b already has one waiting: it queues behind it, in order
    publisher.release.set()

    assert enqueuer.wait_idle(10)
    batches = [[DeliveryMessage.decode(body, headers).delivery_id for _, body, headers in batch]
               for batch in publisher.batches]
    # Turns go on where the last batch left them: b, whose turn came after a's second, goes first.
    assert batches == [["dlv_ten_a_0"], ["dlv_ten_a_1", "dlv_ten_b_0", "dlv_ten_a_2"],
                       ["dlv_ten_b_1", "dlv_ten_a_3", "dlv_ten_a_4"], ["dlv_ten_a_5", "dlv_ten_a_6", "dlv_ten_a_7"],
                       ["dlv_ten_a_8"]]


def test_with_an_express_publisher_a_lone_tenant_does_not_wait_for_the_round_being_published(
    app: Flask, settings: Settings
) -> None:
    publisher, express = GatedPublisher(), GatedPublisher()
    enqueuer = BackgroundEnqueuer(publisher, settings.topology, spacing=0.0, express_publisher=express)  # type: ignore[arg-type]

    def message(tenant: str, n: int) -> DeliveryMessage:
        return DeliveryMessage(f"dlv_{tenant}_{n}", f"evt_{n}", "ep_1", tenant, "order.created", "t", {"n": n})

    def published(batches: list[list[Outgoing]]) -> list[list[str]]:
        return [[DeliveryMessage.decode(body, headers).delivery_id for _, body, headers in batch] for batch in batches]

    enqueuer.submit([message("ten_a", 0)])  # a round of tenant a, held by the broker
    assert publisher.entered.wait(5)
    enqueuer.submit([message("ten_a", 1)])  # a has a round under way: it waits for the next
    enqueuer.submit([message("ten_b", 0), message("ten_b", 1)])  # b has nothing waiting: out at once
    assert express.entered.wait(5)
    enqueuer.submit([message("ten_c", 0)])  # b's express publish is held: c queues for the next one, not the round
    express.release.set()
    wait_until(lambda: len(express.batches) == 2, timeout=5)

    assert published(express.batches) == [["dlv_ten_b_0", "dlv_ten_b_1"], ["dlv_ten_c_0"]]
    assert published(publisher.batches) == []  # a's round is still held
    publisher.release.set()
    assert enqueuer.wait_idle(10)
    assert published(publisher.batches) == [["dlv_ten_a_0"], ["dlv_ten_a_1"]]
    assert len(express.batches) == 2


def test_a_tenant_over_its_share_never_takes_the_express_thread(app: Flask, settings: Settings) -> None:
    publisher, express = GatedPublisher(), RecordingPublisher()
    enqueuer = BackgroundEnqueuer(publisher, settings.topology, spacing=0.0, express_publisher=express)  # type: ignore[arg-type]

    def message(tenant: str, n: int) -> DeliveryMessage:
        return DeliveryMessage(f"dlv_{tenant}_{n}", f"evt_{n}", "ep_1", tenant, "order.created", "t", {"n": n})

    enqueuer.submit([message("ten_b", 0)])  # a round of b's, held by the broker
    assert publisher.entered.wait(5)
    flood = [message("ten_a", n) for n in range(BULK_AFTER + 1)]  # a's first batch already passes its share
    enqueuer.submit(flood)
    enqueuer.submit([message("ten_c", 0)])
    wait_until(lambda: len(express.batches) == 1, timeout=5)
    publisher.release.set()
    assert enqueuer.wait_idle(10)

    assert [[DeliveryMessage.decode(body, headers).delivery_id for _, body, headers in batch]
            for batch in express.batches] == [["dlv_ten_c_0"]]
    assert sum(len(batch) for batch in publisher.batches) == 1 + len(flood)


def test_with_an_express_publisher_a_lone_tenant_does_not_wait_for_the_round_threads_mark(
    app: Flask, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A mark of a flood's confirmed messages waits for the rows the workers hold; nothing else
    # is queued then, yet a message queued for the round thread would wait for the mark to end.
    from webhooks.messaging import enqueuer as module

    marking, release = threading.Event(), threading.Event()
    monkeypatch.setattr(module, "mark_enqueued", lambda messages: (marking.set(), release.wait(10)))
    publisher, express = RecordingPublisher(), RecordingPublisher()
    enqueuer = BackgroundEnqueuer(publisher, settings.topology, spacing=0.0, mark_every=0.0,  # type: ignore[arg-type]
                                  express_publisher=express)  # type: ignore[arg-type]

    def message(tenant: str, n: int) -> DeliveryMessage:
        return DeliveryMessage(f"dlv_{tenant}_{n}", f"evt_{n}", "ep_1", tenant, "order.created", "t", {"n": n})

    enqueuer.submit([message("ten_a", 0)])  # published, then its mark is held
    assert marking.wait(5)
    enqueuer.submit([message("ten_b", 0)])
    wait_until(lambda: len(express.batches) == 1, timeout=5)

    assert [[DeliveryMessage.decode(body, headers).delivery_id for _, body, headers in batch]
            for batch in express.batches] == [["dlv_ten_b_0"]]
    release.set()
    assert enqueuer.wait_idle(10)
    assert len(publisher.batches) == 1


def test_while_another_tenant_floods_a_lone_tenant_takes_the_express_thread_even_when_the_round_is_idle(
    app: Flask, settings: Settings
) -> None:
    # An idle round thread would take the flood's next batch with it: hundreds of messages in one publish.
    publisher, express, shares = RecordingPublisher(), RecordingPublisher(), RecentShares()
    enqueuer = BackgroundEnqueuer(publisher, settings.topology, spacing=0.0, express_publisher=express,  # type: ignore[arg-type]
                                  shares=shares)
    shares.add({"ten_a": BULK_AFTER * 2})  # a flood accepted here a moment ago
    enqueuer.submit([DeliveryMessage("dlv_b", "evt_b", "ep_1", "ten_b", "order.created", "t", {})])
    assert enqueuer.wait_idle(10)
    assert (len(express.batches), len(publisher.batches)) == (1, 0)


def test_a_tenant_s_message_queued_behind_its_express_publish_reaches_the_broker_after_it(
    app: Flask, settings: Settings
) -> None:
    publisher, express = GatedPublisher(), GatedPublisher()
    enqueuer = BackgroundEnqueuer(publisher, settings.topology, spacing=0.0, express_publisher=express)  # type: ignore[arg-type]
    arrived: list[str] = []  # every message, in the order the broker confirmed it
    for gated in (publisher, express):
        confirm = gated.publish

        def publish(messages: Sequence[Outgoing], confirm: Any = confirm) -> int:
            count = confirm(messages)
            arrived.extend(DeliveryMessage.decode(body, headers).delivery_id for _, body, headers in messages)
            return count
        gated.publish = publish  # type: ignore[method-assign]

    def message(tenant: str, n: int) -> DeliveryMessage:
        return DeliveryMessage(f"dlv_{tenant}_{n}", f"evt_{n}", "ep_1", tenant, "order.created", "t", {"n": n})

    enqueuer.submit([message("ten_a", 0)])  # a round of tenant a, held by the broker
    assert publisher.entered.wait(5)
    enqueuer.submit([message("ten_b", 0)])  # b has nothing waiting: out at once, held too
    assert express.entered.wait(5)
    publisher.release.set()
    wait_until(lambda: arrived == ["dlv_ten_a_0"], timeout=5)  # the round thread is idle now
    enqueuer.submit([message("ten_b", 1)])  # b's first is still under way: its second queues behind it
    with pytest.raises(AssertionError):
        wait_until(lambda: len(arrived) > 1, timeout=1)

    express.release.set()
    assert enqueuer.wait_idle(10)
    assert arrived == ["dlv_ten_a_0", "dlv_ten_b_0", "dlv_ten_b_1"]


@pytest.mark.postgresql  # SQLite has one writer at a time
def test_a_mark_locks_its_deliveries_in_id_order_whatever_order_they_lie_in_the_table(
    client: FlaskClient, headers: dict[str, str], app: Flask, settings: Settings, postgres_database: str
) -> None:
    # A worker claims and records in id order; a mark that locked in any other order deadlocked with it.
    create_endpoint(client, headers)
    use_enqueuer(app, settings, RecordingPublisher(confirm=0))
    first, second = (Delivery.get_by_id(post_event(client, headers).json["deliveries"][0]["id"]) for _ in range(2))
    low, high = sorted([first.id, second.id])
    # The lower id's row moves to the end of the heap: a plain scan reaches (and locks) the higher id first.
    Delivery.update(updated_at=utcnow()).where(Delivery.id == low).execute()

    holder = psycopg2.connect(postgres_database)  # a worker's transaction holding the lower id
    holder.cursor().execute("BEGIN; SELECT id FROM delivery WHERE id = %s FOR UPDATE", (low,))
    marking = threading.Thread(target=lambda: (mark_enqueued([_message(first, 1), _message(second, 1)]),
                                               db.release_connection()))
    watcher = psycopg2.connect(postgres_database)
    watcher.autocommit = True  # pg_stat_activity is read once per transaction
    marking.start()
    try:
        wait_until(lambda: _waiting_on_a_lock(watcher) == 1, timeout=10)
        # The mark waits on the lower id without holding the higher one: the worker can go on to lock it.
        other = holder.cursor()
        other.execute("SELECT id FROM delivery WHERE id = %s FOR UPDATE NOWAIT", (high,))
        assert other.fetchall() == [(high,)]
    finally:
        holder.rollback()
        marking.join(10)
        holder.close()
        watcher.close()
    assert all(Delivery.get_by_id(i).enqueued_at is not None for i in (low, high))


def _waiting_on_a_lock(connection: Any) -> int:
    cursor = connection.cursor()
    cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                   "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()")
    return cursor.fetchone()[0]


def test_with_an_express_publisher_a_lone_tenant_does_not_wait_for_messages_queued_for_the_next_round(
    app: Flask, settings: Settings
) -> None:
    publisher, express = RecordingPublisher(), RecordingPublisher()
    enqueuer = BackgroundEnqueuer(publisher, settings.topology, spacing=30.0, batch=2,  # type: ignore[arg-type]
                                  express_publisher=express)  # type: ignore[arg-type]

    def message(tenant: str, n: int) -> DeliveryMessage:
        return DeliveryMessage(f"dlv_{tenant}_{n}", f"evt_{n}", "ep_1", tenant, "order.created", "t", {"n": n})

    enqueuer.submit([message("ten_a", 0)])  # after a quiet spell: out at once
    assert enqueuer.wait_idle(10) and len(publisher.batches) == 1  # its round (publish, mark) is over
    enqueuer.submit([message("ten_a", 1)])  # queued until the spacing has passed
    enqueuer.submit([message("ten_b", 0)])  # nothing of b's waits: out at once, beside a's queue
    wait_until(lambda: len(express.batches) == 1, timeout=5)

    assert [[DeliveryMessage.decode(body, headers).delivery_id for _, body, headers in batch]
            for batch in express.batches] == [["dlv_ten_b_0"]]
    assert len(publisher.batches) == 1  # a's second message still waits for its round
    enqueuer.submit([message("ten_a", 2)])  # a full batch does not wait for the spacing
    assert enqueuer.wait_idle(10)
    assert len(publisher.batches) == 2 and len(express.batches) == 1
