"""Tracing in one process: the request's span, its children, the trace context the messages carry,
resends linked to their event's trace, the relay's one span per pass, and log lines naming the span."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any, Callable, Iterator

import pytest
from flask import Flask
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.api_helpers import create_endpoint, post_event
from tests.conftest import queue_messages, wait_until
from webhooks import logs
from webhooks.config import Settings
from webhooks.messaging.enqueuer import BackgroundEnqueuer
from webhooks.messaging.outbox import relay_once
from webhooks.messaging.publisher import Publisher
from webhooks.observability import tracing
from webhooks.pages.headers import SecurityHeaders
from webhooks.observability.web_spans import TracedRequests
from webhooks.storage.models import Delivery, Event
from webhooks.storage.timeutil import utcnow

CALLER_TRACE, CALLER_SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"


@pytest.fixture
def exported() -> Iterator[Callable[[], list[ReadableSpan]]]:
    """Tracing on in this process, into memory; ``exported()``: the spans finished so far."""
    exporter = InMemorySpanExporter()
    tracing.configure("test", exporter=exporter)

    def spans() -> list[ReadableSpan]:
        tracing.flush()
        return list(exporter.get_finished_spans())

    yield spans
    tracing.shutdown()


def named(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


def hex_ids(span: ReadableSpan) -> tuple[str, str]:
    return f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}"


def wait_published(app: Flask) -> None:
    enqueuer: BackgroundEnqueuer = app.extensions["webhooks.enqueuer"]
    assert enqueuer.wait_idle(10)


@pytest.fixture(params=["shortcut", "views"])
def ingest_app(request: Any, make_app: Callable[..., Flask]) -> Flask:
    """The app with the ingest shortcut (``fast_ingest``), and with Flask's views answering alone."""
    app = make_app()
    if request.param == "views":
        app.config["FAST_INGEST"] = False
        app.wsgi_app = TracedRequests(SecurityHeaders(Flask.wsgi_app.__get__(app)))  # type: ignore[method-assign]
    return app


def test_a_request_with_a_traceparent_is_a_child_of_the_callers_span_with_what_it_ingested(
    ingest_app: Flask, headers: dict[str, str], tenant: Any, exported: Callable[[], list[ReadableSpan]], settings: Settings
) -> None:
    client = ingest_app.test_client()
    create_endpoint(client, headers)
    response = post_event(client, {**headers, "traceparent": TRACEPARENT})
    assert response.status_code == 202
    wait_published(ingest_app)

    spans = exported()
    (request,) = named(spans, "POST /v1/events")
    assert hex_ids(request)[0] == CALLER_TRACE and f"{request.parent.span_id:016x}" == CALLER_SPAN
    assert request.kind is trace.SpanKind.SERVER
    expected = {
        "http.route": "/v1/events", "http.response.status_code": 202, "webhooks.tenant_id": tenant.id,
        "webhooks.event_type": "order.created", "webhooks.events": 1, "webhooks.replayed": False,
        "webhooks.deliveries": 1,
    }
    assert {name: request.attributes.get(name) for name in expected} == expected
    (transaction,) = named(spans, "ingest.transaction")
    (publish,) = named(spans, f"publish {settings.topology.primary}")
    assert transaction.parent.span_id == publish.parent.span_id == request.context.span_id
    # The delivery's message and the event row name the request's span: the attempts join its trace.
    request_traceparent = f"00-{CALLER_TRACE}-{hex_ids(request)[1]}-01"
    (_, message_headers), = queue_messages(settings.topology.primary)
    assert message_headers["traceparent"] == request_traceparent
    assert Event.get_by_id(response.json["id"]).traceparent == request_traceparent


def test_a_request_without_a_traceparent_starts_a_trace_and_a_replay_says_so(
    app: Flask, client: Any, headers: dict[str, str], exported: Callable[[], list[ReadableSpan]]
) -> None:
    create_endpoint(client, headers)
    first = post_event(client, {**headers, "Idempotency-Key": "k1"})
    again = post_event(client, {**headers, "Idempotency-Key": "k1"})
    assert (first.status_code, again.status_code) == (202, 202)
    wait_published(app)

    original, replay = named(exported(), "POST /v1/events")
    assert original.parent is None and hex_ids(original)[0] != CALLER_TRACE
    assert original.attributes["webhooks.replayed"] is False
    assert replay.attributes["webhooks.replayed"] is True and replay.attributes["webhooks.deliveries"] == 0


def test_every_route_gets_its_span_and_a_server_error_is_marked(
    client: Any, headers: dict[str, str], tenant: Any, exported: Callable[[], list[ReadableSpan]]
) -> None:
    endpoint = create_endpoint(client, headers)
    assert client.get(f"/v1/endpoints/{endpoint['id']}", headers=headers).status_code == 200
    assert client.get("/v1/nowhere", headers=headers).status_code == 404

    spans = exported()
    (read,) = named(spans, "GET /v1/endpoints/<endpoint_id>")
    assert read.attributes["webhooks.tenant_id"] == tenant.id and read.status.is_ok
    (missing,) = named(spans, "GET")  # no route matched: named by its method alone
    assert missing.attributes["http.response.status_code"] == 404


def test_a_resend_starts_its_own_trace_linked_to_the_events(
    app: Flask, client: Any, headers: dict[str, str], exported: Callable[[], list[ReadableSpan]], settings: Settings
) -> None:
    create_endpoint(client, headers)
    event = post_event(client, {**headers, "traceparent": TRACEPARENT}).json
    wait_published(app)
    delivery_id = event["deliveries"][0]["id"]
    Delivery.update(status="failed").where(Delivery.id == delivery_id).execute()

    assert client.post(f"/v1/deliveries/{delivery_id}/resend", headers=headers).status_code == 202
    (resend,) = named(exported(), "POST /v1/deliveries/<delivery_id>/resend")
    assert hex_ids(resend)[0] != CALLER_TRACE  # a trace of its own …
    (link,) = resend.links
    assert f"{link.context.trace_id:032x}" == CALLER_TRACE  # … linked to the event's
    assert link.attributes["webhooks.delivery_id"] == delivery_id
    resent = [headers for _, headers in queue_messages(settings.topology.primary) if headers["trigger"] == "resend"]
    assert resent[0]["traceparent"].startswith(f"00-{hex_ids(resend)[0]}-{hex_ids(resend)[1]}-")


def test_the_relay_makes_one_span_per_pass_and_its_messages_keep_their_events_trace(
    app: Flask, client: Any, headers: dict[str, str], exported: Callable[[], list[ReadableSpan]], settings: Settings
) -> None:
    create_endpoint(client, headers)
    for _ in range(3):
        post_event(client, {**headers, "traceparent": TRACEPARENT})
    wait_published(app)
    for queue in settings.topology.all_queues():
        queue_messages(queue)  # (returned to the queue: the relay's copies come on top)
    Delivery.update(enqueued_at=None, next_attempt_at=utcnow() - timedelta(minutes=1)).execute()
    before = len(exported())

    publisher = Publisher(settings.amqp_url)
    try:
        assert relay_once(publisher, settings.topology, grace=1.0) == 3
    finally:
        publisher.close()

    new = exported()[before:]
    (relay,) = new  # one span for the pass, none per message
    assert relay.name == "relay" and relay.parent is None
    assert relay.attributes["webhooks.republished"] == 3
    assert {f"{link.context.trace_id:032x}" for link in relay.links} == {CALLER_TRACE}
    relayed = queue_messages(settings.topology.primary)[-3:]
    assert {headers["traceparent"][3:35] for _, headers in relayed} == {CALLER_TRACE}


def test_a_log_line_written_while_a_span_is_current_names_its_trace_and_span(
    exported: Callable[[], list[ReadableSpan]]
) -> None:
    formatter = logs.Formatter()
    record = logging.LogRecord("webhooks", logging.INFO, __file__, 1, "accepted event=%s", ("evt_1",), None)
    assert "trace_id" not in formatter.format(record)
    with tracing.tracer().start_as_current_span("request") as span:
        line = formatter.format(record)
    trace_id, span_id = f"{span.get_span_context().trace_id:032x}", f"{span.get_span_context().span_id:016x}"
    assert line.endswith(f"accepted event=evt_1 trace_id={trace_id} span_id={span_id}")


def test_with_tracing_off_no_message_carries_a_trace_context(
    app: Flask, client: Any, headers: dict[str, str], settings: Settings
) -> None:
    create_endpoint(client, headers)
    post_event(client, {**headers, "traceparent": TRACEPARENT})
    wait_published(app)

    (_, message_headers), = queue_messages(settings.topology.primary)
    assert "traceparent" not in message_headers and not tracing.on()
