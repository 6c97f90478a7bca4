"""``flask listen`` against the app on a real HTTP server and a real local receiver.

The kill tests run the command as a subprocess and SIGKILL it in three places: between two
events, while the local URL has not answered yet, and at whatever moment half the backlog is in.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from click.testing import Result
from flask import Flask
from standardwebhooks import Webhook

from tests.conftest import settings_env, wait_until
from tests.live_api import LiveApi
from tests.receivers import (
    HOST,
    Receiver,
    RecordedRequest,
    always,
    pause,
    sequence,
    unused_port,
)
from webhooks.ingest import accept as ingest
from webhooks.config import Settings
from webhooks.listen import CursorFile, Page, backoff, iter_pages
from webhooks.storage.models import Event, Tenant
from webhooks.delivery.outgoing import body_bytes
from webhooks.delivery.signing import generate_secret
from webhooks.storage.timeutil import isoformat

ROOT = Path(__file__).resolve().parents[1]

#: A subprocess that takes longer than this has hung.
PROCESS_TIMEOUT = 60


@dataclass
class Rig:
    """A live API, a receiver, a tenant, the secret to sign with and a cursor file."""

    app: Flask
    settings: Settings
    api: LiveApi
    receiver: Receiver
    tenant: SimpleNamespace
    secret: str
    cursor: Path
    #: Every ``spawn``, in order; the ones still running are killed after the test.
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def args(self, *extra: str, follow: bool = False, **options: str) -> list[str]:
        values = {
            "forward-to": self.receiver.url + "/hook", "api-url": self.api.url, "api-key": self.tenant.api_key,
            "secret": self.secret, "cursor-file": str(self.cursor),
        } | {name.replace("_", "-"): value for name, value in options.items()}  # fmt: skip
        flags = [part for name, value in values.items() for part in (f"--{name}", value)]
        return ["listen", *flags, "--follow" if follow else "--no-follow", *extra]

    def run(self, *extra: str, **options: Any) -> Result:
        """``flask listen … --no-follow`` in this process (output captured, not a TTY)."""
        return self.app.test_cli_runner().invoke(args=self.args(*extra, **options))

    def spawn(self, *extra: str, **options: Any) -> subprocess.Popen[bytes]:
        """``python -m flask --app app listen …`` as a subprocess; its output in ``output(n)``."""
        env = settings_env(self.settings) | {"FLASK_APP": "app", "PYTHONUNBUFFERED": "1"}
        command = [sys.executable, "-m", "flask", "--app", "app", *self.args(*extra, **options)]
        with self.cursor.with_name(f"listen-{len(self.processes) + 1}.out").open("wb") as out:
            self.processes.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT))
        return self.processes[-1]

    def output(self, n: int) -> str:
        """What the ``n``-th spawned process printed (1-based)."""
        return self.cursor.with_name(f"listen-{n}.out").read_text()

    def add_events(self, *event_types: str) -> list[Event]:
        with self.app.app_context():
            tenant = Tenant.get_by_id(self.tenant.id)
            return [ingest.accept_event(tenant, kind, {"n": n}).event for n, kind in enumerate(event_types)]

    def forwarded_ids(self) -> list[str]:
        """``webhook-id`` of every request the receiver got, each verified with ``standardwebhooks``."""
        return [self.verified(request)["webhook-id"] for request in self.receiver.requests]

    def verified(self, request: RecordedRequest) -> dict[str, str]:
        Webhook(self.secret).verify(request.body, dict(request.headers))
        return request.headers


@pytest.fixture
def rig(app: Flask, settings: Settings, serve_api: Callable[[], LiveApi], tenant: Any, tmp_path: Path) -> Iterator[Rig]:
    # 204 without a body: ``Receiver`` writes headers and body apart, and a body would wait ~40 ms
    # per request on Nagle + delayed ACK.
    with Receiver(always(204)) as receiver:
        rig = Rig(app, settings, serve_api(), receiver, tenant, generate_secret(), tmp_path / "cursor")
        yield rig
        for process in rig.processes:
            if process.poll() is None:
                process.kill()
                process.wait()


def ids(events: list[Event]) -> list[str]:
    return [event.id for event in events]


def test_backlog_is_forwarded_in_seq_order_a_page_at_a_time_signed_like_the_worker(rig: Rig) -> None:
    events = rig.add_events(*["order.created"] * 300)

    result = rig.run()

    assert result.exit_code == 0, result.output
    assert rig.api.afters == [0, 100, 200]  # three pages of the default 100, fetched one after the other
    assert rig.forwarded_ids() == ids(events)
    for request, event in zip(rig.receiver.requests, events):
        assert request.body == body_bytes(event.event_type, isoformat(event.created_at) or "", event.payload)
    assert rig.cursor.read_text() == f"{events[-1].seq}\n"
    lines = result.output.splitlines()
    assert lines[0] == f"forwarding events after seq=0 from {rig.api.url} to {rig.receiver.url}/hook"
    assert lines[1] == "event types: all but operational ones"
    assert lines[2].startswith(f"→ {events[0].id} order.created seq=1 204 ")
    assert lines[-1] == "caught up at seq=300: 300 forwarded"


def test_batch_events_are_caught_up_like_any_others_in_seq_order(rig: Rig) -> None:
    before = rig.add_events("order.created")
    with httpx.Client(base_url=rig.api.url, headers={"Authorization": f"Bearer {rig.tenant.api_key}"}) as api:
        answer = api.post("/v1/events/batch",
                          json=[{"event_type": "order.paid", "payload": {"n": n}} for n in range(150)])
    assert answer.status_code == 202, answer.text
    batch = answer.json()["data"]
    after = rig.add_events("order.shipped")

    result = rig.run()

    assert result.exit_code == 0, result.output
    assert rig.forwarded_ids() == [before[0].id, *(event["id"] for event in batch), after[0].id]
    sent = [json.loads(request.body)["data"] for request in rig.receiver.requests[1:-1]]
    assert sent == [{"n": n} for n in range(150)]
    assert rig.cursor.read_text() == "152\n"


def test_restart_resumes_after_the_saved_cursor(rig: Rig) -> None:
    first = rig.add_events("order.created", "order.paid", "order.created")
    assert rig.run().exit_code == 0
    second = rig.add_events("order.shipped", "order.created")

    result = rig.run()

    assert result.exit_code == 0, result.output
    assert "after seq=3 " in result.output
    assert rig.api.afters == [0, 3]
    assert rig.forwarded_ids() == ids(first + second)


def test_after_option_overrides_the_cursor_file(rig: Rig) -> None:
    events = rig.add_events(*["order.created"] * 4)
    assert rig.run().exit_code == 0

    assert rig.run("--after", "2").exit_code == 0

    assert rig.forwarded_ids() == ids(events + events[2:])
    assert rig.cursor.read_text() == "4\n"


@pytest.mark.parametrize("kill_at", ["between_events", "before_the_local_answer", "once_half_arrived"])
def test_killed_halfway_then_restarted_it_loses_nothing_and_repeats_at_most_the_event_in_flight(
    rig: Rig, kill_at: str
) -> None:
    events = rig.add_events(*["order.created"] * 300)
    half = 150

    def kill() -> None:
        first = rig.processes[0]
        if first.poll() is None:
            first.kill()
            first.wait()

    def answer(request: RecordedRequest) -> tuple[int, None, bytes]:
        if kill_at == "before_the_local_answer" and len(rig.receiver.requests) == half:
            kill()  # the 150th request arrived; its 2xx will never reach the client
        return 204, None, b""

    if kill_at == "between_events":  # cursor committed at 150, the next page being fetched
        rig.api.on_feed = lambda after: kill() if after == half else None
    rig.receiver.responder = answer
    killed = rig.spawn("--limit", "50")
    if kill_at == "once_half_arrived":
        rig.receiver.wait_for(half, timeout=PROCESS_TIMEOUT)
        kill()
    assert killed.wait(timeout=PROCESS_TIMEOUT) == -signal.SIGKILL
    before = rig.forwarded_ids()

    restarted = rig.spawn("--limit", "50")

    assert restarted.wait(timeout=PROCESS_TIMEOUT) == 0, rig.output(2)
    forwarded = rig.forwarded_ids()
    assert list(dict.fromkeys(forwarded)) == ids(events)  # none lost, first arrivals in seq order
    assert rig.cursor.read_text() == "300\n"
    repeated = [event_id for event_id, count in Counter(forwarded).items() if count > 1]
    if kill_at == "between_events":
        assert repeated == []
        assert f"after seq={half} " in rig.output(2)
    elif kill_at == "before_the_local_answer":
        # Sent again because it was never acknowledged (the client died waiting): a retry, not a duplicate.
        assert repeated == [events[half - 1].id] == [before[-1]] == [forwarded[len(before)]]
        assert f"after seq={half - 1} " in rig.output(2)
    else:
        # Only the event in flight at the kill can come again, as the first request after the restart.
        assert repeated in ([], [before[-1]])
        assert not repeated or forwarded[len(before)] == before[-1]


def test_sigterm_finishes_the_event_in_flight_then_stops_with_its_cursor_saved(rig: Rig) -> None:
    events = rig.add_events(*["order.created"] * 10)

    def respond(request: RecordedRequest) -> tuple[int, None, bytes]:
        if len(rig.receiver.requests) == 3:
            rig.processes[0].send_signal(signal.SIGTERM)
            pause(0.3)  # the signal lands while this request is in flight
        return 204, None, b""

    rig.receiver.responder = respond
    assert rig.spawn().wait(timeout=PROCESS_TIMEOUT) == 0
    assert rig.forwarded_ids() == ids(events[:3])
    assert rig.cursor.read_text() == f"{events[2].seq}\n"
    assert "stopped at seq=3: 3 forwarded" in rig.output(1)

    restarted = rig.spawn()

    assert restarted.wait(timeout=PROCESS_TIMEOUT) == 0
    assert rig.forwarded_ids() == ids(events)  # each exactly once


def test_failing_local_url_is_retried_with_backoff_never_skipped(rig: Rig) -> None:
    events = rig.add_events("order.created", "order.paid")
    rig.receiver.responder = sequence([(500, None, b"database is down"), 204])

    result = rig.run()

    assert result.exit_code == 0, result.output
    assert rig.forwarded_ids() == ids(events[:1] + events)
    assert f"✗ {events[0].id} order.created seq=1 500 database is down: retrying in 1s" in result.output
    assert rig.cursor.read_text() == "2\n"


def test_one_event_type_is_filtered_by_the_api_several_by_the_listener(rig: Rig, tmp_path: Path) -> None:
    events = rig.add_events(*["a.created", "b.created", "c.created"] * 2)

    one = rig.run("--event-type", "a.created")
    several = rig.run("--event-type", "a.created", "--event-type", "b.created", cursor_file=str(tmp_path / "ab"))

    assert one.exit_code == 0 and several.exit_code == 0, one.output + several.output
    assert [query.get("event_type") for query in rig.api.feed_queries] == [["a.created"], None]
    assert rig.forwarded_ids() == ids([events[0], events[3]] + [events[0], events[1], events[3], events[4]])
    assert rig.cursor.read_text() == "4\n"
    assert (tmp_path / "ab").read_text() == "6\n"  # past the trailing c.created it skipped


def test_by_default_the_service_s_operational_events_are_not_forwarded(rig: Rig) -> None:
    ordered = rig.add_events("order.created")
    with rig.app.app_context():
        offline = ingest.store_event(Tenant.get_by_id(rig.tenant.id), "endpoint.offline", {"n": 1}, None).event
    shipped = rig.add_events("order.shipped")

    result = rig.run()

    assert result.exit_code == 0, result.output
    assert "event types: all but operational ones" in result.output
    assert rig.forwarded_ids() == ids(ordered + shipped)
    assert rig.cursor.read_text() == f"{offline.seq + 1}\n"


def test_event_types_takes_a_comma_separated_list_and_may_name_operational_types(rig: Rig) -> None:
    events = rig.add_events("a.created", "b.created", "c.created")
    with rig.app.app_context():
        offline = ingest.store_event(Tenant.get_by_id(rig.tenant.id), "endpoint.offline", {"n": 1}, None).event

    result = rig.run("--event-types", "a.created, endpoint.offline", "--event-types", "b.created")

    assert result.exit_code == 0, result.output
    assert rig.forwarded_ids() == ids(events[:2]) + [offline.id]


def test_endpoint_option_forwards_what_that_endpoint_subscribes_to(rig: Rig) -> None:
    headers = {"Authorization": f"Bearer {rig.tenant.api_key}"}
    endpoint = rig.app.test_client().post(
        "/v1/endpoints", json={"url": "http://127.0.0.1:9/hook", "event_types": ["b.created", "c.created"]},
        headers=headers,
    ).json
    events = rig.add_events("a.created", "b.created", "c.created", "a.created")

    result = rig.run("--endpoint", endpoint["id"])
    both = rig.run("--endpoint", endpoint["id"], "--event-types", "a.created")
    unknown = rig.run("--endpoint", "ep_nope")

    assert result.exit_code == 0, result.output
    assert f"event types: b.created, c.created (those of {endpoint['id']})" in result.output
    assert rig.forwarded_ids() == ids(events[1:3])
    assert both.exit_code == 2 and "give --endpoint or --event-types, not both" in both.output
    assert unknown.exit_code == 1 and "endpoint not found" in unknown.output


def test_wrong_api_key_exits_2_with_a_message(rig: Rig) -> None:
    result = rig.run(api_key="key_0000.not-a-key")

    assert result.exit_code == 2
    assert "Error: the API refused the key (invalid API key (unknown or revoked))" in result.output
    assert rig.receiver.requests == []


def test_invalid_secret_is_a_usage_error(rig: Rig) -> None:
    result = rig.run(secret="whsec_dG9vIHNob3J0")

    assert result.exit_code == 2
    assert "Invalid value for '--secret'" in result.output and "must be the endpoint secret" in result.output
    assert rig.api.feed_queries == []


def test_second_listener_on_the_same_cursor_file_is_refused(rig: Rig) -> None:
    with CursorFile(rig.cursor).locked():
        result = rig.run()

    assert result.exit_code == 1
    assert f"another `flask listen` is using {rig.cursor}" in result.output


def test_unreachable_api_fails_without_follow_and_is_retried_with_follow(
    rig: Rig, serve_api: Callable[[int], LiveApi]
) -> None:
    (event,) = rig.add_events("order.created")
    port = unused_port()
    down = f"http://{HOST}:{port}"
    result = rig.run(api_url=down)
    assert result.exit_code == 1
    assert f"cannot reach the API at {down}: ConnectError" in result.output

    process = rig.spawn(api_url=down, follow=True)
    wait_until(lambda: "API unreachable (ConnectError" in rig.output(1), timeout=PROCESS_TIMEOUT)
    serve_api(port)

    rig.receiver.wait_for(1, timeout=PROCESS_TIMEOUT)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=PROCESS_TIMEOUT) == 0
    assert rig.forwarded_ids() == [event.id]
    assert "retrying in 1s" in rig.output(1) and f"→ {event.id} order.created seq=1 204" in rig.output(1)


def test_cursor_commit_is_one_replace_of_a_file_prepared_before_sending(tmp_path: Path) -> None:
    cursor = CursorFile(tmp_path / "cursor")
    assert cursor.load() is None
    cursor.save(7)

    cursor.prepare(8)  # written and fsynced aside; a kill here leaves 7

    assert CursorFile(tmp_path / "cursor").load() == 7
    cursor.commit()
    assert cursor.load() == 8
    assert sorted(path.name for path in tmp_path.iterdir()) == ["cursor"]


def test_backoff_doubles_from_one_second_up_to_thirty() -> None:
    assert [backoff(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]


def test_pages_are_fetched_only_when_the_previous_one_is_used_up() -> None:
    fetched: list[int] = []

    def fetch(after: int) -> Page:
        fetched.append(after)
        return Page([{"seq": after + 1}], after + 1, has_more=after < 2)

    pages = iter_pages(fetch, 0)
    assert next(pages).next_cursor == 1 and fetched == [0]
    assert [page.next_cursor for page in pages] == [2, 3]
    assert fetched == [0, 1, 2]
