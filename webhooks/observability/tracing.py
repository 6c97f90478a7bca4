"""OpenTelemetry traces: off unless an OTLP endpoint is set, one provider per process, W3C context.

Tracing is on when ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
is set (and ``OTEL_SDK_DISABLED`` is not ``true``); spans go over OTLP/HTTP with protobuf
(``opentelemetry-exporter-otlp-proto-http``), which reads the rest of the standard
``OTEL_EXPORTER_OTLP_*`` variables itself. ``OTEL_SERVICE_NAME`` (default ``webhooks``),
``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_TRACES_SAMPLER``/``_ARG`` (default
``parentbased_always_on``) are the SDK's. Each process calls ``configure`` once it runs on
its own (gunicorn's ``post_fork``, the worker's and the clock's ``main``) and ``shutdown``
on a clean stop, which exports what is queued within a few seconds.

While it is off nothing here costs more than a flag test: no provider, no spans, no
headers. Contexts travel as W3C ``traceparent`` strings (request headers, AMQP headers,
the event row), which ``traceparent_of`` and ``context_of`` make and read.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections import Counter
from typing import Any, Callable, Iterator, Mapping, Sequence

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags, Tracer

from webhooks import logs
from webhooks.observability.export import DropCounter, DroppingBatchProcessor

log = logging.getLogger(__name__)

#: ``service.name`` when neither ``OTEL_SERVICE_NAME`` nor ``OTEL_RESOURCE_ATTRIBUTES`` names one.
DEFAULT_SERVICE_NAME = "webhooks"


class _State:
    """This process's tracing: off (``tracer`` None) or its provider and tracer."""

    provider: TracerProvider | None = None
    tracer: Tracer | None = None
    #: Where ``record_span`` hands its spans (the provider's only processor).
    processor: DroppingBatchProcessor | None = None
    pid = 0
    #: Called by ``shutdown`` before the provider's last export (spans still being made).
    flushes: list[Callable[[], None]] = []
    #: Told of every span dropped (``metrics.spans_dropped``, as the entry points pass it).
    drop_counter: DropCounter | None = None


_state = _State()


def endpoint(environ: Mapping[str, str] = os.environ) -> str | None:
    """Where spans go, or None when tracing is off."""
    if environ.get("OTEL_SDK_DISABLED", "false").strip().lower() == "true":
        return None
    return environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None


def configure(process: str, *, count_dropped: DropCounter | None = None, exporter: SpanExporter | None = None) -> bool:
    """Start tracing in this process (``web``, ``worker`` or ``clock``) if an endpoint is set; whether it is on.

    Call it in the process that makes the spans, after any fork: the export thread and its
    connection belong to the process that starts them. ``count_dropped`` is told of every span
    that never reaches the collector (``metrics.spans_dropped``). ``exporter``: send spans there
    instead of over OTLP (tracing is then on whatever the environment says).
    """
    if _state.tracer is not None and _state.pid == os.getpid():
        return True
    target = endpoint() if exporter is None else type(exporter).__name__
    if target is None:
        _state.provider = _state.tracer = None
        return False
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()

    resource = Resource.create({"webhooks.process": process})  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)  # the sampler: OTEL_TRACES_SAMPLER
    _state.drop_counter = count_dropped
    _state.processor = DroppingBatchProcessor(exporter, spans_dropped)
    provider.add_span_processor(_state.processor)
    # The exporter logs every failed batch; DroppingBatchProcessor says it once a minute instead.
    logging.getLogger("opentelemetry.exporter").setLevel(logging.CRITICAL)
    _state.provider, _state.tracer, _state.pid = provider, provider.get_tracer("webhooks"), os.getpid()
    logs.set_trace_ids(ids_of_current)
    log.info("tracing on: %s spans to %s as service %s (OTEL_SERVICE_NAME %s, OTEL_RESOURCE_ATTRIBUTES %s), "
             "sampler %s %s", process, target, resource.attributes.get(SERVICE_NAME),
             os.environ.get("OTEL_SERVICE_NAME", "unset"), os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "unset"),
             os.environ.get("OTEL_TRACES_SAMPLER", "parentbased_always_on"), os.environ.get("OTEL_TRACES_SAMPLER_ARG", ""))
    return True


def before_shutdown(flush: Callable[[], None]) -> None:
    """Have ``shutdown`` call ``flush`` first (it makes the spans it holds)."""
    _state.flushes.append(flush)


def _make_held() -> None:
    """Have those that hold spans still to be made (``before_shutdown``) make them now."""
    for make in _state.flushes:
        try:
            make()
        except Exception:  # noqa: BLE001 - the rest is still exported
            log.warning("making the last spans failed", exc_info=True)


def flush() -> None:
    """Make the spans still held and export everything queued, now."""
    _make_held()
    if _state.provider is not None:
        _state.provider.force_flush()


def shutdown() -> None:
    """Export what is queued (``export.SHUTDOWN_SECONDS`` at most) and stop tracing in this process."""
    _make_held()
    provider, _state.provider, _state.tracer, _state.processor = _state.provider, None, None, None
    logs.set_trace_ids(None)
    if provider is not None and _state.pid == os.getpid():
        provider.shutdown()  # DroppingBatchProcessor.shutdown: bounded


def spans_dropped(reason: str, spans: int) -> None:
    """Spans that never reached the collector: tell ``configure``'s ``count_dropped``."""
    if _state.drop_counter is not None:
        _state.drop_counter(reason, spans)


def on() -> bool:
    """Whether this process makes spans."""
    return _state.tracer is not None


def now_ns() -> int:
    """Wall time in nanoseconds, a span's start to come (0 while off: nothing will use it)."""
    return time.time_ns() if _state.tracer is not None else 0


def tracer() -> Tracer:
    """This process's tracer (only while ``on()``)."""
    assert _state.tracer is not None, "tracing is off"
    return _state.tracer


# --- contexts ---------------------------------------------------------------------------------


def traceparent_of(context: SpanContext) -> str | None:
    """The W3C ``traceparent`` naming ``context`` (None for an invalid one)."""
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def span_context_of(traceparent: str | None) -> SpanContext | None:
    """The (remote) span context a W3C ``traceparent`` names, or None if it names none."""
    if not traceparent or len(traceparent) < 55:
        return None
    version, _, rest = traceparent.partition("-")
    trace_hex, span_hex, flags_hex = rest[:32], rest[33:49], rest[50:52]
    if len(version) != 2 or version == "ff" or rest[32:33] != "-" or rest[49:50] != "-" or len(flags_hex) != 2:
        return None
    if version == "00" and len(rest) != 52:
        return None
    try:
        trace_id, span_id, flags = int(trace_hex, 16), int(span_hex, 16), int(flags_hex, 16)
    except ValueError:
        return None
    if not trace_id or not span_id:
        return None
    return SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags & TraceFlags.SAMPLED))


def context_of(traceparent: str | None) -> Context | None:
    """A context whose current span is the one ``traceparent`` names (None if it names none)."""
    span_context = span_context_of(traceparent)
    return None if span_context is None else trace.set_span_in_context(NonRecordingSpan(span_context))


def current_traceparent() -> str | None:
    """The ``traceparent`` of the span current in this thread, or None (always None while off)."""
    if _state.tracer is None:
        return None
    return traceparent_of(trace.get_current_span().get_span_context())


def annotate(**attributes: Any) -> None:
    """Set attributes on the current span (``tenant_id="ten_…"`` becomes ``webhooks.tenant_id``); no-op while off."""
    if _state.tracer is None:
        return
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes(_named(attributes))


@contextlib.contextmanager
def side_span(name: str, **attributes: Any) -> Iterator[None]:
    """A child of the current span around the block that does not become current itself (what
    the block publishes or stores stays under the request's span); nothing while off."""
    if _state.tracer is None:
        yield
        return
    parent, start_ns, error = trace.get_current_span().get_span_context(), time.time_ns(), None
    try:
        yield
    except BaseException as failure:
        error = type(failure).__name__
        raise
    finally:
        record_span(name, parent if parent.is_valid else None, start_ns, time.time_ns(), _named(attributes),
                    error=error)


def link_current_to(traceparent: str | None, **attributes: Any) -> None:
    """Link the current span to the span ``traceparent`` names (a resend's request to its event's)."""
    if _state.tracer is None:
        return
    linked = span_context_of(traceparent)
    span = trace.get_current_span()
    if linked is not None and span.is_recording():
        span.add_link(linked, _named(attributes))


def _named(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Our attributes under ``webhooks.``, the unset ones left out."""
    return {f"webhooks.{name}": value for name, value in attributes.items() if value is not None}


#: The instrumentation scope of every span made here.
_SCOPE = InstrumentationScope("webhooks")


def record_span(name: str, parent: SpanContext | None, start_ns: int, end_ns: int, attributes: dict[str, Any], *,
                kind: SpanKind = SpanKind.INTERNAL, error: str | None = None) -> None:
    """A finished span made from a record of what happened (an attempt, a publish, a transaction).

    It goes straight to the export queue as the SDK's ``ReadableSpan``, not through a tracer:
    what a live span does on the way (the sampler, validating each attribute, the span's lock)
    cost 49 us a span here, against a worker's 120 us of CPU per delivery; this costs a
    fraction of it. ``attributes`` must be plain values (str, bool, int, float). A span under
    a ``parent`` follows the parent's sampling decision (W3C's sampled flag, as the default
    ``parentbased_*`` samplers do); one without starts a trace if the sampler keeps it.
    """
    provider, processor = _state.provider, _state.processor
    if provider is None or processor is None:
        return
    if parent is not None and parent.is_valid:
        if not parent.trace_flags.sampled:
            return
        trace_id, flags = parent.trace_id, parent.trace_flags
    else:
        parent, trace_id = None, provider.id_generator.generate_trace_id()
        if not provider.sampler.should_sample(None, trace_id, name, kind, attributes).decision.is_sampled():
            return
        flags = TraceFlags(TraceFlags.SAMPLED)
    context = SpanContext(trace_id, provider.id_generator.generate_span_id(), is_remote=False, trace_flags=flags)
    status = trace.Status(trace.StatusCode.ERROR, error) if error is not None else trace.Status(trace.StatusCode.UNSET)
    processor.on_end(ReadableSpan(name, context, parent, provider.resource, attributes, kind=kind, status=status,
                                  start_time=start_ns, end_time=end_ns, instrumentation_scope=_SCOPE))


def publish_spans(traceparents: Sequence[str | None], confirmed: int, queue: str, start_ns: int) -> None:
    """One ``publish`` span per trace among a batch of messages just published (begun at ``start_ns``),
    under the span each trace's messages name: how many of them the broker confirmed."""
    if _state.tracer is None:
        return
    end_ns = time.time_ns()
    sent, acked = Counter(traceparents), Counter(traceparents[:confirmed])
    for traceparent, count in sent.items():
        parent = span_context_of(traceparent)
        if parent is None:
            continue
        record_span(f"publish {queue}", parent, start_ns, end_ns, {
            "messaging.system": "rabbitmq", "messaging.destination.name": queue,
            "messaging.batch.message_count": len(traceparents), "webhooks.messages": count,
            "webhooks.confirmed": acked[traceparent],
        }, kind=SpanKind.PRODUCER, error="not confirmed: the relay publishes them" if acked[traceparent] < count else None)


#: Links a summary span carries at most.
MAX_SUMMARY_LINKS = 32


def summary_span(name: str, start_ns: int, traceparents: Sequence[str | None], **attributes: Any) -> None:
    """One span of its own trace for a pass over many messages (the clock's relay), linked to the first
    ``MAX_SUMMARY_LINKS`` distinct traces among them: a backend sees a pass, not a span per message."""
    if _state.tracer is None:
        return
    links, seen = [], set()
    for traceparent in traceparents:
        if len(links) >= MAX_SUMMARY_LINKS:
            break
        linked = span_context_of(traceparent) if traceparent not in seen else None
        seen.add(traceparent)
        if linked is not None:
            links.append(trace.Link(linked))
    span = _state.tracer.start_span(name, context=_NO_PARENT, links=links, start_time=start_ns,
                                    attributes={**_named(attributes), "webhooks.messages": len(traceparents)})
    span.end()


#: A context with no span: what starts under it starts a trace of its own.
_NO_PARENT = trace.set_span_in_context(trace.INVALID_SPAN)


def ids_of_current() -> tuple[str, str] | None:
    """``(trace_id, span_id)`` in hex of the span current in this thread, for log lines; None while off or outside one."""
    if _state.tracer is None:
        return None
    context = trace.get_current_span().get_span_context()
    return (f"{context.trace_id:032x}", f"{context.span_id:016x}") if context.is_valid else None
