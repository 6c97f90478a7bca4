"""One span per HTTP request of the web process, continuing the caller's W3C trace context.

``TracedRequests`` wraps the whole WSGI app, in front of the ingest shortcut
(``webhooks.api.fast_ingest``), so every request has its span whichever path answers it.
A ``traceparent`` header makes the span a child of the caller's span (their trace shows our
ingest inside it); without one it starts a trace. While the request runs its span is
current: ingestion adds the tenant, event type, number of events and replays
(``tracing.annotate``), the transaction and publish spans hang under it, and the delivery
messages carry it to the worker.

The request's route is put in the environ under ``ROUTE`` by Flask's ``before_request``
(``note_route``) or by the shortcut; the span is named ``<METHOD> <route>`` at the end. The
threaded gunicorn worker (``webhooks.server.worker``) puts under ``WHOLE_AT_NS`` when the
request had arrived whole: the span starts then, so the wait for a thread is inside it
(``webhooks.thread_wait_ms``). While tracing is off the wrapper costs one call and a flag test.
A request the web process answers itself before any thread sees it (408, 413, 431, a 429 for a
client with too many requests waiting) has a span too, made by ``record_refusal``.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable

from flask import request
from opentelemetry import context as otel_context, trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from webhooks.observability import tracing

#: environ keys: the route that answered (``/v1/events/<event_id>``), and when the request was whole (ns).
ROUTE = "webhooks.route"
WHOLE_AT_NS = "webhooks.whole_at_ns"

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

_PROPAGATOR = TraceContextTextMapPropagator()


class _EnvironGetter:
    """Reads ``traceparent``/``tracestate`` from a WSGI environ (``HTTP_TRACEPARENT``)."""

    def get(self, environ: dict[str, Any], key: str) -> list[str] | None:
        value = environ.get("HTTP_" + key.upper().replace("-", "_"))
        return None if value is None else [value]

    def keys(self, environ: dict[str, Any]) -> list[str]:
        return [key[5:].lower().replace("_", "-") for key in environ if key.startswith("HTTP_")]


_GETTER = _EnvironGetter()


class TracedRequests:
    """WSGI middleware: a ``SERVER`` span around each request while tracing is on."""

    def __init__(self, app: WSGIApp) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if not tracing.on():
            return self.app(environ, start_response)
        return self._traced(environ, start_response)

    def _traced(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        parent = _PROPAGATOR.extract(environ, getter=_GETTER)  # type: ignore[arg-type]
        now_ns = time.time_ns()
        whole_at = environ.get(WHOLE_AT_NS)
        span = tracing.tracer().start_span(
            method, context=parent, kind=trace.SpanKind.SERVER, start_time=whole_at or now_ns,
            attributes={"http.request.method": method, "url.path": environ.get("PATH_INFO", "")},
        )
        if whole_at:
            span.set_attribute("webhooks.thread_wait_ms", round((now_ns - whole_at) / 1e6, 3))
        status: list[int] = []

        def recording(status_line: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            status.append(int(status_line[:3]))
            return start_response(status_line, headers, exc_info)

        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            return self.app(environ, recording)
        except BaseException as error:
            span.record_exception(error)
            raise
        finally:
            otel_context.detach(token)
            _finish(span, method, environ, status[-1] if status else 500)


def _finish(span: trace.Span, method: str, environ: dict[str, Any], status: int) -> None:
    route = environ.get(ROUTE)
    if route:
        span.update_name(f"{method} {route}")
        span.set_attribute("http.route", route)
    span.set_attribute("http.response.status_code", status)
    if status >= 500:
        span.set_status(trace.Status(trace.StatusCode.ERROR))
    span.end()


def note_route() -> None:
    """``before_request``: the matched route, for the request's span (while tracing is on)."""
    if tracing.on() and request.url_rule is not None:
        request.environ[ROUTE] = request.url_rule.rule


def record_refusal(status: int, message: str, peer: str, method_and_path: tuple[str, str] | None,
                   began_ns: int) -> None:
    """The span of a request refused before the app saw it: ``<METHOD> refused`` (``HTTP refused``
    if its request line never arrived whole), from when its first byte came to now."""
    if not tracing.on():
        return
    now_ns = time.time_ns()
    attributes: dict[str, Any] = {"http.response.status_code": status, "client.address": peer,
                                  "webhooks.refused": message}
    method = "HTTP"
    if method_and_path is not None:
        method, attributes["url.path"] = method_and_path
        attributes["http.request.method"] = method
    tracing.record_span(f"{method} refused", None, began_ns or now_ns, now_ns, attributes, kind=trace.SpanKind.SERVER)
