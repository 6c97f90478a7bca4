"""The WSGI shortcut for accepted events answers exactly as the Flask views, and leaves everything else to them."""

from __future__ import annotations

import io
from typing import Any, Callable

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import EnvironBuilder

from tests.conftest import IngestClock
from tests.api_helpers import create_endpoint, row_counts, views_run
from webhooks.api.costs import COST
from webhooks.pages.headers import SecurityHeaders


@pytest.fixture
def fast_and_slow(make_app: Callable[..., Flask]) -> tuple[Flask, Flask]:
    """Two apps on one database: with the shortcut (the default) and without it."""
    fast = make_app()
    slow = make_app()
    slow.config["FAST_INGEST"] = False
    # Flask alone, in the security headers every answer gets (webhooks.pages.headers).
    slow.wsgi_app = SecurityHeaders(Flask.wsgi_app.__get__(slow))  # type: ignore[method-assign]
    return fast, slow


def comparable(response: Any) -> tuple[int, dict[str, str], bytes]:
    headers = {k: v for k, v in response.headers.items() if k != "Content-Length"}
    return response.status_code, headers, response.get_data()


def test_the_shortcut_answers_an_accepted_event_without_flask(
    fast_and_slow: tuple[Flask, Flask], headers: dict[str, str]
) -> None:
    fast, _ = fast_and_slow
    seen = views_run(fast)
    client = fast.test_client()
    create_endpoint(client, headers)
    seen.clear()

    single = client.post("/v1/events", json={"event_type": "a", "payload": {"n": 1}}, headers=headers)
    batch = client.post("/v1/events/batch", json=[{"event_type": "a", "payload": {}}] * 2, headers=headers)

    assert (single.status_code, batch.status_code) == (202, 202)
    assert seen == []


@pytest.mark.parametrize("first_through", ["fast", "slow"])
def test_replays_are_byte_for_byte_the_same_through_either_path(
    fast_and_slow: tuple[Flask, Flask], headers: dict[str, str], first_through: str
) -> None:
    fast, slow = (app.test_client() for app in fast_and_slow)
    first, second = (fast, slow) if first_through == "fast" else (slow, fast)
    create_endpoint(first, headers)
    create_endpoint(first, headers, event_types=["a"])
    single = {"event_type": "a", "payload": {"z": 1, "a": [1, "é"]}, "idempotency_key": "k"}
    batch = [{"event_type": "a", "payload": {"n": n}, "idempotency_key": f"b{n}"} for n in range(3)]

    original = first.post("/v1/events", json=single, headers=headers)
    original_batch = first.post("/v1/events/batch", json=batch, headers=headers)
    replays = [client.post("/v1/events", json=single, headers={**headers, "Idempotency-Key": "k"})
               for client in (fast, slow)]
    batch_replays = [client.post("/v1/events/batch", json=batch, headers=headers) for client in (fast, slow)]

    assert original.status_code == 202 and comparable(replays[0]) == comparable(replays[1])
    assert replays[0].get_json() == original.get_json() and replays[0].headers["Idempotent-Replayed"] == "true"
    assert comparable(batch_replays[0]) == comparable(batch_replays[1])
    replayed_ids = [e["id"] for e in batch_replays[0].get_json()["data"]]
    assert replayed_ids == [e["id"] for e in original_batch.get_json()["data"]]


def test_new_events_have_the_same_answer_shape_through_either_path(
    fast_and_slow: tuple[Flask, Flask], headers: dict[str, str]
) -> None:
    fast, slow = (app.test_client() for app in fast_and_slow)
    create_endpoint(fast, headers)
    body = {"event_type": "a", "payload": {"n": 1}}

    answers = [client.post("/v1/events", json=body, headers=headers) for client in (fast, slow)]

    (fast_status, fast_headers, _), (slow_status, slow_headers, _) = map(comparable, answers)
    assert fast_status == slow_status == 202
    assert set(fast_headers) == set(slow_headers) and fast_headers["Content-Type"] == slow_headers["Content-Type"]
    assert answers[0].headers["Location"] == f"/v1/events/{answers[0].get_json()['id']}"
    assert list(answers[0].get_json()) == list(answers[1].get_json())
    assert [a.get_json()["seq"] for a in answers] == [1, 2]


@pytest.mark.parametrize(
    ("path", "body", "extra", "status"),
    [
        ("/v1/events", {"event_type": "a", "payload": {}}, {"Authorization": "Bearer key_nope.x"}, 401),
        ("/v1/events", {"event_type": "a b", "payload": {}}, {}, 422),
        ("/v1/events", {"event_type": "a", "payload": {}, "idempotency_key": "x"}, {"Idempotency-Key": "y"}, 409),
        ("/v1/events", {"event_type": "endpoint.offline", "payload": {}}, {}, 422),
        ("/v1/events/batch", [], {}, 422),
        ("/v1/events/batch", [{"event_type": "a", "payload": {}}], {"Idempotency-Key": "y"}, 422),
        ("/v1/events", "[1, NaN]", {"Content-Type": "application/json"}, 400),
        ("/v1/events", "event_type=a&payload=x", {"Content-Type": "application/x-www-form-urlencoded"}, 415),
        ("/v1/events/batch", '[{"event_type": "a", "payload": {}}]', {"Content-Type": "text/plain"}, 415),
    ],
)
def test_everything_but_an_accepted_event_is_left_to_the_views(
    fast_and_slow: tuple[Flask, Flask], headers: dict[str, str], path: str, body: Any, extra: dict[str, str],
    status: int,
) -> None:
    fast, slow = fast_and_slow
    seen = views_run(fast)
    before = row_counts()

    def send(app: Flask) -> Any:
        kwargs = {"data": body} if isinstance(body, str) else {"json": body}
        return app.test_client().post(path, headers={**headers, **extra}, **kwargs)

    answers = [send(fast), send(slow)]

    assert comparable(answers[0]) == comparable(answers[1])
    assert answers[0].status_code == status and seen == [path]
    assert row_counts() == before


def test_a_conflict_and_a_refusal_reach_the_view_having_written_nothing(
    make_app: Callable[..., Flask], headers: dict[str, str], ingest_clock: IngestClock
) -> None:
    client: FlaskClient = make_app(ingest_rate_limit=2.0).test_client()
    client.post("/v1/events", json={"event_type": "a", "payload": {"n": 1}, "idempotency_key": "k"}, headers=headers)
    before = row_counts()

    conflict = client.post("/v1/events", json={"event_type": "a", "payload": {"n": 2}, "idempotency_key": "k"},
                           headers=headers)
    client.post("/v1/events", json={"event_type": "a", "payload": {}}, headers=headers)  # the last token
    refused = client.post("/v1/events/batch", json=[{"event_type": "a", "payload": {}}], headers=headers)

    assert conflict.status_code == 409 and "idempotency key 'k'" in conflict.get_json()["message"]
    assert refused.status_code == 429 and refused.headers["Retry-After"]
    assert row_counts()["Event"] == before["Event"] + 1


def test_the_shortcut_checks_the_key_before_it_reads_the_body(fast_and_slow: tuple[Flask, Flask]) -> None:
    """A request without a valid key costs no body read, let alone parsing: a client
    without a key must not make the server read (or wait for) a body."""
    fast, _ = fast_and_slow

    class Body(io.BytesIO):
        reads = 0

        def read(self, *args: Any) -> bytes:
            Body.reads += 1
            return super().read(*args)

    environ = EnvironBuilder(path="/v1/events", method="POST", data=b'{"event_type": "a", "payload": {}}',
                             headers={"Authorization": "Bearer key_nope.x", "Content-Type": "application/json"}
                             ).get_environ()
    environ["wsgi.input"] = Body(b'{"event_type": "a", "payload": {}}')
    statuses: list[str] = []

    b"".join(fast.wsgi_app(environ, lambda status, headers, *_: statuses.append(status)))

    assert statuses == ["401 UNAUTHORIZED"] and Body.reads == 0


@pytest.mark.parametrize("path", ["fast", "slow"])
def test_the_deliveries_a_request_made_are_told_to_the_web_server(
    fast_and_slow: tuple[Flask, Flask], headers: dict[str, str], path: str
) -> None:
    """The server paces a client by them while others are active (``webhooks.server.turns``)."""
    app = fast_and_slow[0 if path == "fast" else 1]
    client = app.test_client()
    for _ in range(3):
        create_endpoint(client, headers)

    def made(url: str, body: Any, extra: dict[str, str] | None = None) -> int:
        environ = EnvironBuilder(path=url, method="POST", json=body, headers={**headers, **(extra or {})}).get_environ()
        b"".join(app.wsgi_app(environ, lambda *_: None))
        return environ.get(COST, 0)

    assert made("/v1/events", {"event_type": "a", "payload": {}}, {"Idempotency-Key": "k"}) == 3
    assert made("/v1/events/batch", [{"event_type": "a", "payload": {}}] * 2) == 6
    assert made("/v1/events", {"event_type": "a", "payload": {}}, {"Idempotency-Key": "k"}) == 0  # a replay
