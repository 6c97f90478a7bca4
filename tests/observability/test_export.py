"""Span export never holds anyone up: a full queue drops and counts, a failed export counts, a stop is bounded."""

from __future__ import annotations

import threading
from typing import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from webhooks.observability.attempt_spans import next_step
from webhooks.observability.export import DroppingBatchProcessor


class Exporter(SpanExporter):
    """Answers ``result``; with ``hold`` set, each export waits until it is released (a collector hanging)."""

    def __init__(self, result: SpanExportResult, hold: threading.Event | None = None) -> None:
        self.result, self.hold, self.exported, self.stopped = result, hold, 0, False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.hold is not None:
            self.hold.wait(30)
        self.exported += len(spans)
        return self.result

    def shutdown(self) -> None:
        self.stopped = True
        if self.hold is not None:
            self.hold.set()  # as the OTLP exporter's shutdown ends a retry under way


def spans_through(processor: DroppingBatchProcessor, count: int) -> None:
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    for number in range(count):
        tracer.start_span(f"span {number}").end()


def test_spans_the_queue_cannot_hold_are_dropped_and_counted_without_waiting() -> None:
    dropped: list[tuple[str, int]] = []
    hanging = Exporter(SpanExportResult.SUCCESS, hold=threading.Event())
    processor = DroppingBatchProcessor(hanging, lambda reason, n: dropped.append((reason, n)), max_queue=10,
                                       max_batch=5, every=0.01)

    spans_through(processor, 50)  # returns although the exporter hangs

    assert sum(n for reason, n in dropped if reason == "queue_full") >= 30
    processor.shutdown(timeout_millis=100)
    assert hanging.stopped


def test_a_failed_export_counts_its_spans() -> None:
    dropped: list[tuple[str, int]] = []
    processor = DroppingBatchProcessor(Exporter(SpanExportResult.FAILURE), lambda reason, n: dropped.append((reason, n)))

    spans_through(processor, 7)
    processor.force_flush()

    assert dropped == [("export_failed", 7)]


def test_a_clean_stop_exports_what_is_queued() -> None:
    exporter = Exporter(SpanExportResult.SUCCESS)
    processor = DroppingBatchProcessor(exporter, lambda reason, n: None, every=60)

    spans_through(processor, 3)
    processor.shutdown()

    assert exporter.exported == 3 and exporter.stopped


def test_an_attempt_span_names_where_the_delivery_goes_next() -> None:
    assert next_step("delivered", None, False) == "delivered"
    assert next_step("retrying", "webhooks.wait.5m", False) == "tier 5m"
    assert next_step("retrying", "webhooks.wait.defer", False) == "tier defer"
    assert next_step("retrying", "webhooks.deliver", False) == "primary"
    assert next_step("failed", None, True) == "dead"
    assert next_step("parked", None, False) == "parked"
