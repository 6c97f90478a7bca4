"""Traces end to end: web (gunicorn), worker and clock as separate processes, sending OTLP/HTTP to a
collector of the test's own; one event posted with a caller's ``traceparent``, its first attempt
failing and its second succeeding."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator

import httpx
import pytest

from tests.conftest import settings_env, wait_until
from tests.observability.collector import CollectedSpan, Collector, timeline
from tests.receivers import Receiver, sequence, unused_port
from tests.web_process import WebProcesses
from webhooks.config import Settings
from webhooks.storage.models import Delivery, Event

ROOT = Path(__file__).resolve().parents[2]

#: The caller's own span: our request's span must be its child.
CALLER_TRACE, CALLER_SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"


class Stack:
    """web, worker and clock, each a process of its own, as the Procfile runs them."""

    def __init__(self, settings: Settings, tmp_path: Path, **env: str) -> None:
        self.env = {**settings_env(settings), **env}
        self.web = WebProcesses(tmp_path)
        self.url = self.web.start(settings, app="app:create_app()", **env)
        self.others = [
            subprocess.Popen([sys.executable, "-m", module], cwd=ROOT, env=self.env,
                             stdout=(tmp_path / f"{module}.log").open("wb"), stderr=subprocess.STDOUT)
            for module in ("webhooks.worker", "webhooks.clock")
        ]
        self.web_log = self.web.logs[0]
        self.worker_log = tmp_path / "webhooks.worker.log"

    def stop(self) -> None:
        """A clean stop of every process (SIGTERM), as honcho does: each flushes its spans."""
        for process in self.others:
            process.send_signal(signal.SIGTERM)
        for process in self.others:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.web.stop()


@pytest.fixture
def stack(settings: Settings, tmp_path: Path) -> Iterator[Any]:
    """``stack(**env)``: start the three processes with ``env``; stopped at the end of the test."""
    started: list[Stack] = []

    def start(**env: str) -> Stack:
        started.append(Stack(settings, tmp_path, **env))
        return started[-1]

    yield start
    for one in started:
        one.stop()


@pytest.fixture
def collector() -> Iterator[Collector]:
    running = Collector()
    yield running
    running.stop()


def post_event(url: str, tenant: SimpleNamespace, receiver: Receiver, **headers: str) -> str:
    """Register ``receiver`` as an endpoint and post one event to it; the event's id."""
    auth = {"Authorization": f"Bearer {tenant.api_key}"}
    created = httpx.post(f"{url}/v1/endpoints", json={"url": f"{receiver.url}/hook"}, headers=auth, trust_env=False)
    assert created.status_code == 201, created.text
    posted = httpx.post(f"{url}/v1/events", json={"event_type": "order.created", "payload": {"order": 42}},
                        headers={**auth, **headers}, trust_env=False)
    assert posted.status_code == 202, posted.text
    return str(posted.json()["id"])


def delivered() -> bool:
    return Delivery.select().where(Delivery.status == "delivered").count() == 1


def test_one_trace_holds_the_callers_request_and_both_attempts_with_their_outcome_and_tier(
    stack: Any, collector: Collector, tenant: SimpleNamespace
) -> None:
    with Receiver(sequence([500, 200])) as receiver:
        running = stack(OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint, OTEL_SERVICE_NAME="webhooks-test")
        event_id = post_event(running.url, tenant, receiver, traceparent=TRACEPARENT)
        receiver.wait_for(2, timeout=30)
        wait_until(delivered, timeout=30)

        def attempts() -> list[CollectedSpan]:
            found = [span for span in collector.spans if span.name.startswith("attempt ")]
            return found if len(found) == 2 else []

        first, second = sorted(wait_until(attempts, timeout=30), key=lambda span: span.attributes["webhooks.attempt"])

    spans = {span.name: span for span in collector.spans if span.trace_id == CALLER_TRACE}
    request = spans["POST /v1/events"]
    assert request.parent_span_id == CALLER_SPAN  # a child of the caller's span, in the caller's trace
    assert request.resource["webhooks.process"] == "web" and request.resource["service.name"] == "webhooks-test"
    assert request.attributes["http.route"] == "/v1/events"
    assert request.attributes["http.response.status_code"] == 202
    assert request.attributes["webhooks.tenant_id"] == tenant.id
    assert request.attributes["webhooks.event_type"] == "order.created"
    assert request.attributes["webhooks.event_id"] == event_id
    assert request.attributes["webhooks.events"] == 1 and request.attributes["webhooks.replayed"] is False
    assert spans["ingest.transaction"].parent_span_id == request.span_id
    wait_until(lambda: any(span.name.startswith("publish ") for span in collector.spans), timeout=10)
    publish = next(span for span in collector.spans if span.name.startswith("publish "))
    assert (publish.trace_id, publish.parent_span_id) == (CALLER_TRACE, request.span_id)
    assert publish.attributes["webhooks.confirmed"] == 1

    for attempt in (first, second):  # across processes: the worker's spans in the request's trace
        assert (attempt.trace_id, attempt.parent_span_id) == (CALLER_TRACE, request.span_id)
        assert attempt.resource["webhooks.process"] == "worker"
        assert attempt.attributes["webhooks.event_id"] == event_id
        assert attempt.attributes["webhooks.tenant_id"] == tenant.id
        assert attempt.attributes["webhooks.trigger"] == "ladder"
    assert first.attributes["http.response.status_code"] == 500 and first.error
    assert first.attributes["webhooks.outcome"] == "retrying"
    assert first.attributes["webhooks.next"] == "tier 1s"
    assert first.attributes["webhooks.connect_ms"] >= 0  # the worker's first call opened a connection
    assert second.attributes["http.response.status_code"] == 200 and not second.error
    assert second.attributes["webhooks.next"] == "delivered"
    assert second.start_ns >= first.end_ns
    drawn = timeline([span for span in collector.spans if span.trace_id == CALLER_TRACE])
    print(drawn)  # the timeline docs/operating.md shows (pytest -s)
    assert [line.split(" [")[0].strip() for line in drawn.splitlines()] == [
        "POST /v1/events", "ingest.transaction", publish.name, "attempt 1", "attempt 2"]
    # The web's log line about the event names the trace and span it was written in.
    assert re.search(rf"accepted event={event_id} .* trace_id={CALLER_TRACE} span_id={request.span_id}",
                     running.web_log.read_text())
    assert re.search(rf"attempted .* attempt=2 .* trace_id={CALLER_TRACE}", running.worker_log.read_text())


def test_with_tracing_off_nothing_is_sent(stack: Any, collector: Collector, tenant: SimpleNamespace) -> None:
    with Receiver(sequence([500, 200])) as receiver:
        running = stack(OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint, OTEL_SDK_DISABLED="true")
        event_id = post_event(running.url, tenant, receiver, traceparent=TRACEPARENT)
        receiver.wait_for(2, timeout=30)
        wait_until(delivered, timeout=30)
        running.stop()  # a clean stop: whatever a process held would have been flushed now

    assert collector.requests == 0
    assert Event.get_by_id(event_id).traceparent is None
    assert "trace_id=" not in running.web_log.read_text()


def test_a_collector_that_is_down_breaks_no_delivery_and_the_dropped_spans_are_counted(
    stack: Any, tenant: SimpleNamespace, tmp_path: Path
) -> None:
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    nobody = f"http://127.0.0.1:{unused_port()}"  # nothing listens there
    with Receiver(sequence([500, 200])) as receiver:
        running = stack(OTEL_EXPORTER_OTLP_ENDPOINT=nobody, OTEL_EXPORTER_OTLP_TIMEOUT="1",
                        PROMETHEUS_MULTIPROC_DIR=str(metrics_dir))
        post_event(running.url, tenant, receiver, traceparent=TRACEPARENT)
        receiver.wait_for(2, timeout=30)  # the first attempt failed, the second came, as without tracing
        wait_until(delivered, timeout=30)

    def dropped() -> float:
        text = httpx.get(f"{running.url}/metrics", trust_env=False).text
        found = re.findall(r'^webhooks_trace_spans_dropped_total\{reason="export_failed"\} (\S+)$', text, re.MULTILINE)
        return float(found[0]) if found else 0.0

    assert wait_until(lambda: dropped() >= 4, timeout=30)  # the request's spans and both attempts'


def test_a_request_the_web_process_refuses_before_the_app_has_a_span_too(
    settings: Settings, tmp_path: Path, collector: Collector
) -> None:
    web = WebProcesses(tmp_path)
    url = web.start(settings, app="app:create_app()", OTEL_EXPORTER_OTLP_ENDPOINT=collector.endpoint)
    try:
        too_large = httpx.post(f"{url}/v1/events?token=secret", content=b"x" * (settings.max_body_bytes + 1),
                               headers={"Authorization": "Bearer whoever"}, trust_env=False)
        assert too_large.status_code == 413

        def refused() -> CollectedSpan | None:
            return next((span for span in collector.spans if span.name == "POST refused"), None)

        span = wait_until(refused, timeout=30)
    finally:
        web.stop()
    assert span.attributes["http.response.status_code"] == 413
    assert span.attributes["url.path"] == "/v1/events"  # the query (which may hold a secret) left out
    assert "request body too large" in span.attributes["webhooks.refused"]
    assert span.resource["webhooks.process"] == "web"
