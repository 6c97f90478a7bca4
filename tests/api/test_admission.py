"""Per-tenant admission: a tenant has at most ``TENANT_MAX_CONCURRENT_REQUESTS`` API requests in progress
per web process; one more is answered 429 at once, with ``Retry-After: 1``, and nothing is written."""

from __future__ import annotations

import io
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any, Callable, Iterator

import pytest
from flask import Flask, g
from prometheus_client import REGISTRY
from werkzeug.test import TestResponse

from tests.api.test_fast_ingest import views_run
from tests.api_helpers import HOOK_URL, row_counts
from tests.concurrency import in_threads
from webhooks.api.admission import SLOT, Admission, ConcurrencyLimit, TooManyConcurrentRequests, admit
from webhooks.config import Settings
from webhooks.ingest import accept
from webhooks.storage.models import Event
from webhooks.tenant_share import SHARE_WINDOW_SECONDS as SHARE_WINDOW

Auth = Callable[[SimpleNamespace], dict[str, str]]

EVENT = {"event_type": "order.created", "payload": {"order": 1}}

#: The ingest routes the fast path answers, each with a valid body.
INGEST = [("/v1/events", EVENT), ("/v1/events/batch", [EVENT, EVENT])]


# -- the count ---------------------------------------------------------------------------------


def test_a_tenant_is_admitted_up_to_its_limit_and_other_tenants_are_counted_apart() -> None:
    limit = ConcurrencyLimit(2)

    assert [limit.try_enter("ten_a") for _ in range(3)] == [True, True, False]
    assert limit.try_enter("ten_b") is True
    assert (limit.in_progress("ten_a"), limit.in_progress("ten_b")) == (2, 1)


def test_leaving_frees_a_place_and_a_tenant_with_none_left_is_forgotten() -> None:
    limit = ConcurrencyLimit(1)
    limit.try_enter("ten_a")

    limit.leave("ten_a")

    assert limit.tenants() == 0
    assert limit.try_enter("ten_a") is True


def test_of_many_threads_asking_at_once_exactly_the_limit_are_admitted() -> None:
    limit = ConcurrencyLimit(2)

    admitted = in_threads(32, lambda _: limit.try_enter("ten_a"))

    assert admitted.count(True) == 2 and admitted.count(False) == 30


def test_counts_stay_exact_when_threads_enter_and_leave_at_once() -> None:
    limit = ConcurrencyLimit(1_000_000)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: a lost update would show
    try:
        in_threads(8, lambda i: [limit.try_enter(f"ten_{i % 2}") for _ in range(5_000)])
        entered = (limit.in_progress("ten_0"), limit.in_progress("ten_1"))
        in_threads(8, lambda i: [limit.leave(f"ten_{i % 2}") for _ in range(5_000)])
    finally:
        sys.setswitchinterval(interval)

    assert entered == (20_000, 20_000)
    assert limit.tenants() == 0


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError):
        ConcurrencyLimit(0)


# -- running: a tenant's share of the process while others are active ----------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def started(limit: ConcurrencyLimit, tenant_id: str) -> tuple[threading.Thread, threading.Event]:
    """``limit.run(tenant_id)`` in a thread of its own; the event is set once it runs."""
    running = threading.Event()
    thread = threading.Thread(target=lambda: (limit.run(tenant_id), running.set()), daemon=True)
    thread.start()
    return thread, running


def test_a_tenant_alone_runs_up_to_its_limit_at_once() -> None:
    limit = ConcurrencyLimit(4, clock=Clock())
    for _ in range(4):
        assert limit.try_enter("ten_a")

    for _ in range(4):
        limit.run("ten_a")  # none of them waits

    assert limit.share("ten_a") == 4


def test_while_another_tenant_is_active_a_tenant_runs_one_request_at_a_time_and_the_next_waits_its_turn() -> None:
    limit = ConcurrencyLimit(4, clock=Clock())
    for _ in range(2):
        limit.try_enter("ten_a")
    limit.try_enter("ten_b")
    limit.run("ten_a")

    second, second_runs = started(limit, "ten_a")
    assert not second_runs.wait(0.2)  # a's second request waits while its first runs
    limit.run("ten_b")  # b's lone request does not wait for a's

    limit.stop_running("ten_a")

    assert second_runs.wait(5)
    second.join(5)


def test_a_tenant_gets_its_whole_limit_back_once_the_others_have_been_quiet_for_the_share_window() -> None:
    clock = Clock()
    limit = ConcurrencyLimit(4, clock=clock)
    limit.try_enter("ten_b")
    limit.leave("ten_b")  # b's request is over, but b is still counted as active
    limit.try_enter("ten_a")
    assert limit.share("ten_a") == 1

    clock.now += SHARE_WINDOW + 0.1

    assert limit.share("ten_a") == 4
    assert limit.share("ten_b") == 4  # a, admitted as long ago, no longer counts against b either


# -- the request's slot --------------------------------------------------------------------------


def wsgi_app(work: Callable[[dict[str, Any]], None]) -> Callable[..., list[bytes]]:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        work(environ)
        start_response("204 No Content", [])
        return []

    return app


def test_a_request_takes_one_slot_however_often_it_is_admitted() -> None:
    limit = ConcurrencyLimit(1)
    counted = []

    def twice(environ: dict[str, Any]) -> None:
        admit(environ, "ten_a")  # the fast path
        admit(environ, "ten_a")  # then the views, after a handover
        counted.append(limit.in_progress("ten_a"))

    Admission(wsgi_app(twice), limit)({}, lambda *_: None)

    assert counted == [1] and limit.tenants() == 0


@pytest.mark.parametrize("error", [RuntimeError("the view failed"), ConnectionResetError("the client went away")])
def test_the_slot_is_given_back_when_the_request_fails(error: Exception) -> None:
    limit = ConcurrencyLimit(1)

    def fail(environ: dict[str, Any]) -> None:
        admit(environ, "ten_a")
        raise error

    with pytest.raises(type(error)):
        Admission(wsgi_app(fail), limit)({}, lambda *_: None)

    assert limit.tenants() == 0


def test_a_refused_request_counts_nothing() -> None:
    limit = ConcurrencyLimit(1)
    limit.try_enter("ten_a")

    with pytest.raises(TooManyConcurrentRequests) as refused:
        Admission(wsgi_app(lambda environ: admit(environ, "ten_a")), limit)({}, lambda *_: None)

    assert limit.in_progress("ten_a") == 1
    assert refused.value.retry_after == 1 and "already has 1 in progress" in str(refused.value)


def test_without_admission_admitting_does_nothing() -> None:
    environ: dict[str, Any] = {}

    admit(environ, "ten_a")

    assert SLOT not in environ


# -- the setting --------------------------------------------------------------------------------


def test_the_setting_defaults_to_four_and_zero_turns_it_off(make_app: Callable[..., Flask]) -> None:
    assert Settings.from_env(env={}).tenant_max_concurrent_requests == 4
    assert Settings.from_env(env={"TENANT_MAX_CONCURRENT_REQUESTS": "5"}).tenant_max_concurrent_requests == 5
    assert "webhooks.admission" not in make_app(tenant_max_concurrent_requests=0).extensions


@pytest.mark.parametrize("bad", ["-1", "two", "1.5"])
def test_a_setting_that_is_not_a_whole_number_from_zero_stops_the_process(bad: str) -> None:
    with pytest.raises(ValueError, match="TENANT_MAX_CONCURRENT_REQUESTS must be a whole number"):
        Settings.from_env(env={"TENANT_MAX_CONCURRENT_REQUESTS": bad})


# -- through the app -----------------------------------------------------------------------------


class Gate:
    """Holds every request that reaches ``hold()`` until ``open()``; ``wait_for(n)`` returns once n are held."""

    def __init__(self) -> None:
        self._opened = threading.Event()
        self._held = 0
        self._arrived = threading.Condition()

    def hold(self) -> None:
        with self._arrived:
            self._held += 1
            self._arrived.notify_all()
        if not self._opened.wait(timeout=60):
            raise RuntimeError("the test never opened the gate")

    def wait_for(self, count: int) -> None:
        with self._arrived:
            assert self._arrived.wait_for(lambda: self._held >= count, timeout=30), f"{self._held} of {count} held"

    def open(self) -> None:
        self._opened.set()


@pytest.fixture
def app(make_app: Callable[..., Flask]) -> Flask:
    """The app of the tests below: a limit of 2, so that the third request of a tenant is one too many."""
    return make_app(tenant_max_concurrent_requests=2)


@pytest.fixture
def gate() -> Iterator[Gate]:
    gate = Gate()
    yield gate
    gate.open()  # whatever happened, no request thread is left waiting


def hold_ingestion(monkeypatch: pytest.MonkeyPatch, tenant: SimpleNamespace, gate: Gate) -> None:
    """``tenant``'s events wait at ``gate`` inside ingestion (on the fast path and in the views alike)."""
    original = accept.accept_events

    def gated(who: Any, items: Any, **kwargs: Any) -> Any:
        if who.id == tenant.id:
            gate.hold()
        return original(who, items, **kwargs)

    monkeypatch.setattr(accept, "accept_events", gated)


def hold_views(app: Flask, blueprint: str, tenant: SimpleNamespace, gate: Gate) -> None:
    """``tenant``'s requests to ``blueprint`` wait at ``gate`` after authentication, before the view."""

    def gated() -> None:
        if g.tenant.id == tenant.id:
            gate.hold()

    app.before_request_funcs.setdefault(blueprint, []).append(gated)


def send(app: Flask, method: str, path: str, headers: dict[str, str], body: Any = None) -> TestResponse:
    """One request on a client of its own (each thread its own)."""
    return app.test_client().open(path, method=method, json=body, headers=headers)


def refusals() -> float:
    return REGISTRY.get_sample_value("webhooks_api_refused_total", {"limit": "concurrent_requests"}) or 0.0


def assert_refused_at_the_limit(response: TestResponse) -> None:
    assert response.status_code == 429
    assert response.headers["Retry-After"] == "1"
    assert response.json["code"] == 429 and response.json["status"] == "Too Many Requests"
    assert "too many concurrent requests" in response.json["message"] and "has 2 in progress" in response.json["message"]


@pytest.mark.parametrize(("path", "body"), INGEST)
def test_a_tenants_third_concurrent_ingest_gets_429_at_once_while_another_tenant_is_accepted(
    app: Flask, tenant: SimpleNamespace, other_tenant: SimpleNamespace, auth: Auth, gate: Gate,
    monkeypatch: pytest.MonkeyPatch, path: str, body: Any,
) -> None:
    hold_ingestion(monkeypatch, tenant, gate)
    seen = views_run(app)
    refused_before = refusals()
    with ThreadPoolExecutor(2) as pool:
        held = [pool.submit(send, app, "POST", path, auth(tenant), body) for _ in range(2)]
        gate.wait_for(2)
        before = row_counts()
        refused = send(app, "POST", path, auth(tenant), body)
        written_by_refusal = {table: n - before[table] for table, n in row_counts().items() if n != before[table]}
        other = send(app, "POST", path, auth(other_tenant), body)
        gate.open()
        accepted = [future.result(timeout=30) for future in held]

    assert_refused_at_the_limit(refused)
    assert written_by_refusal == {}
    assert other.status_code == 202
    assert [response.status_code for response in accepted] == [202, 202]
    assert Event.select().where(Event.tenant == tenant.id).count() == 2 * (len(body) if path.endswith("batch") else 1)
    assert seen == [path]  # the shortcut answered the others; the refusal was answered by the views' 429
    assert refusals() == refused_before + 1
    assert send(app, "POST", path, auth(tenant), body).status_code == 202  # the slots were given back


def test_a_tenants_third_concurrent_view_request_gets_429_and_writes_nothing(
    app: Flask, tenant: SimpleNamespace, other_tenant: SimpleNamespace, auth: Auth, gate: Gate,
) -> None:
    hold_views(app, "endpoints", tenant, gate)
    with ThreadPoolExecutor(2) as pool:
        held = [pool.submit(send, app, "GET", "/v1/endpoints", auth(tenant)) for _ in range(2)]
        gate.wait_for(2)
        before = row_counts()
        refused = send(app, "POST", "/v1/endpoints", auth(tenant), {"url": HOOK_URL})
        after_refusal = row_counts()
        other = send(app, "POST", "/v1/endpoints", auth(other_tenant), {"url": HOOK_URL})
        gate.open()
        listed = [future.result(timeout=30) for future in held]

    assert_refused_at_the_limit(refused)
    assert after_refusal == before
    assert other.status_code == 201
    assert [response.status_code for response in listed] == [200, 200]


def test_a_request_the_shortcut_hands_to_the_views_is_not_refused_by_its_own_slot(
    make_app: Callable[..., Flask], headers: dict[str, str],
) -> None:
    app = make_app(tenant_max_concurrent_requests=1)
    seen = views_run(app)

    conflict = app.test_client().post("/v1/events", json={**EVENT, "idempotency_key": "a"},
                                      headers={**headers, "Idempotency-Key": "b"})

    assert conflict.status_code == 409 and seen == ["/v1/events"]
    assert app.extensions["webhooks.admission"].tenants() == 0


def fail_ingestion(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the database went away")

    monkeypatch.setattr(accept, "accept_events", fail)


def fail_views(app: Flask) -> None:
    def fail() -> None:
        raise RuntimeError("the view failed")

    app.before_request_funcs.setdefault("endpoints", []).append(fail)


@pytest.mark.parametrize(("path", "break_it"), [
    ("/v1/events", lambda app, monkeypatch: fail_ingestion(monkeypatch)),
    ("/v1/endpoints", lambda app, monkeypatch: fail_views(app)),
])
def test_a_request_that_fails_gives_its_slot_back(
    make_app: Callable[..., Flask], headers: dict[str, str], monkeypatch: pytest.MonkeyPatch, path: str,
    break_it: Callable[[Flask, pytest.MonkeyPatch], None],
) -> None:
    app = make_app(tenant_max_concurrent_requests=1)
    break_it(app, monkeypatch)

    answers = [send(app, "POST", path, headers, EVENT if path == "/v1/events" else {"url": HOOK_URL}).status_code
               for _ in range(3)]

    assert answers == [500, 500, 500]
    assert app.extensions["webhooks.admission"].tenants() == 0


class GoneAway(io.BytesIO):
    """A request body whose client hangs up before sending it."""

    def read(self, size: int | None = -1) -> bytes:
        raise ConnectionResetError("the client went away")

    def readinto(self, buffer: Any) -> int:
        raise ConnectionResetError("the client went away")


def test_a_client_that_goes_away_mid_request_gives_its_slot_back(
    make_app: Callable[..., Flask], headers: dict[str, str],
) -> None:
    app = make_app(tenant_max_concurrent_requests=1)

    answers = [
        app.test_client().post("/v1/endpoints", input_stream=GoneAway(), content_length=100,
                               content_type="application/json", headers=headers).status_code
        for _ in range(2)
    ]

    assert 429 not in answers and answers[0] >= 400
    assert app.extensions["webhooks.admission"].tenants() == 0


def test_with_the_limit_at_zero_a_tenant_has_any_number_of_requests_in_progress(
    make_app: Callable[..., Flask], tenant: SimpleNamespace, auth: Auth, gate: Gate, monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = make_app(tenant_max_concurrent_requests=0)
    hold_ingestion(monkeypatch, tenant, gate)
    with ThreadPoolExecutor(4) as pool:
        held: list[Future[TestResponse]] = [
            pool.submit(send, app, "POST", "/v1/events", auth(tenant), EVENT) for _ in range(4)
        ]
        gate.wait_for(4)
        gate.open()
        answers = [future.result(timeout=30).status_code for future in held]

    assert answers == [202] * 4
