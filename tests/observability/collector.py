"""An OTLP/HTTP trace collector of the tests' own: it decodes what it is sent with ``opentelemetry-proto``."""

from __future__ import annotations

import http.server
import threading
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Status


@dataclass(frozen=True)
class CollectedSpan:
    """One span as the collector received it, ids in hex."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: int
    attributes: dict[str, Any]
    #: The resource's attributes (``service.name``, ``webhooks.process``).
    resource: dict[str, Any]
    start_ns: int
    end_ns: int
    error: bool
    links: tuple[str, ...]  # "<trace_id>-<span_id>" of each linked span


def value_of(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return None if kind is None else getattr(value, kind)


class Collector:
    """Listens on 127.0.0.1:<ephemeral port> for ``POST /v1/traces`` until ``stop``."""

    def __init__(self) -> None:
        self._spans: list[CollectedSpan] = []
        self.requests = 0
        self._lock = threading.Lock()
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                collector._take(request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _take(self, request: ExportTraceServiceRequest) -> None:
        spans = []
        for resource_spans in request.resource_spans:
            resource = {item.key: value_of(item.value) for item in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.append(CollectedSpan(
                        trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(), name=span.name, kind=span.kind,
                        attributes={item.key: value_of(item.value) for item in span.attributes},
                        resource=resource, start_ns=span.start_time_unix_nano, end_ns=span.end_time_unix_nano,
                        error=span.status.code == Status.STATUS_CODE_ERROR,
                        links=tuple(f"{link.trace_id.hex()}-{link.span_id.hex()}" for link in span.links),
                    ))
        with self._lock:
            self.requests += 1
            self._spans.extend(spans)

    @property
    def spans(self) -> list[CollectedSpan]:
        with self._lock:
            return list(self._spans)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def timeline(spans: list[CollectedSpan], width: int = 40) -> str:
    """One trace's spans as text: each under its parent, its start from the trace's first span, its
    duration, and a bar placing it on the trace's time line (the docs show one)."""
    if not spans:
        return ""
    first, last = min(span.start_ns for span in spans), max(span.end_ns for span in spans)
    scale = width / max(last - first, 1)
    children: dict[str, list[CollectedSpan]] = {}
    ids = {span.span_id for span in spans}
    for span in sorted(spans, key=lambda one: one.start_ns):
        children.setdefault(span.parent_span_id if span.parent_span_id in ids else "", []).append(span)
    lines: list[str] = []

    def walk(parent: str, depth: int) -> None:
        for span in children.get(parent, []):
            start = int((span.start_ns - first) * scale)
            bar = " " * start + "#" * max(1, int((span.end_ns - span.start_ns) * scale))
            label = f"{'  ' * depth}{span.name} [{span.resource.get('webhooks.process', '?')}]"
            lines.append(f"{label:<44} {(span.start_ns - first) / 1e6:>9.1f} ms {(span.end_ns - span.start_ns) / 1e6:>8.1f} ms "
                         f"|{bar:<{width}}|")
            walk(span.span_id, depth + 1)

    walk("", 0)
    return "\n".join(lines)
