"""Span export that never holds up the service: a bounded queue, one export thread, drops counted.

The SDK's ``BatchSpanProcessor`` logs a warning for every span it drops when its queue is
full, and its export failures are counted nowhere an operator looks. With a collector
that is down a worker would log a line per attempt. This processor keeps the same shape
(ended spans queue; a thread exports them in batches through the OTLP exporter) but a
full queue drops the span silently and counts it, a failed export counts its spans, and
the failure is logged at most once a minute: ``webhooks_trace_spans_dropped_total``.
Nothing on the caller's side ever waits for the network.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Callable

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

log = logging.getLogger(__name__)

#: Spans waiting for export at most; more are dropped (and counted).
MAX_QUEUE = 8192
#: Spans per export request.
MAX_BATCH = 512
#: The export thread wakes this often (seconds), or sooner once a batch is full.
EXPORT_EVERY_SECONDS = 0.5
#: Seconds a clean stop waits at most for the last spans to be exported.
SHUTDOWN_SECONDS = 5.0
#: An export failure is logged at most this often (seconds).
WARN_EVERY_SECONDS = 60.0

#: ``(reason, spans)``: called for every span dropped (``queue_full`` or ``export_failed``).
DropCounter = Callable[[str, int], None]


class DroppingBatchProcessor(SpanProcessor):
    """Ended, sampled spans to ``exporter`` in batches from a thread of its own; drops counted, never waited on."""

    def __init__(self, exporter: SpanExporter, count_dropped: DropCounter, max_queue: int = MAX_QUEUE,
                 max_batch: int = MAX_BATCH, every: float = EXPORT_EVERY_SECONDS) -> None:
        self.exporter, self.count_dropped = exporter, count_dropped
        self.max_queue, self.max_batch, self.every = max_queue, max_batch, every
        self._queue: deque[ReadableSpan] = deque()
        self._wake = threading.Event()
        self._stopped = False
        self._export_lock = threading.Lock()
        self._warned_at = float("-inf")
        self._thread = threading.Thread(target=self._run, name="trace-export", daemon=True)
        self._thread.start()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        if self._stopped or not span.context.trace_flags.sampled:
            return
        if len(self._queue) >= self.max_queue:
            self.count_dropped("queue_full", 1)
            return
        self._queue.append(span)  # deque.append is atomic: no lock on the caller's path
        if len(self._queue) >= self.max_batch:
            self._wake.set()

    def _run(self) -> None:
        while not self._stopped:
            self._wake.wait(self.every)
            self._wake.clear()
            self._export_all()

    def _export_all(self) -> None:
        with self._export_lock:
            while self._queue:
                batch = [self._queue.popleft() for _ in range(min(self.max_batch, len(self._queue)))]
                try:
                    ok = self.exporter.export(batch) is SpanExportResult.SUCCESS
                except Exception:  # noqa: BLE001 - an exporter error is a failed export, nothing more
                    ok = False
                if not ok:
                    self.count_dropped("export_failed", len(batch))
                    self._warn(len(batch))

    def _warn(self, spans: int) -> None:
        now = time.monotonic()
        if now - self._warned_at >= WARN_EVERY_SECONDS:
            self._warned_at = now
            log.warning("trace export failed: %d spans dropped (is the OTLP collector up? counted in "
                        "webhooks_trace_spans_dropped_total; said at most once a minute)", spans)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self._export_all()
        return True

    def shutdown(self, timeout_millis: int = int(SHUTDOWN_SECONDS * 1000)) -> None:
        """Export what is queued, waiting ``timeout_millis`` at most (a collector that is down must
        not hold up a clean stop), then stop the exporter (which ends any retry under way)."""
        if self._stopped:
            return
        self._stopped = True
        self._wake.set()
        finisher = threading.Thread(target=self._export_all, name="trace-export-last", daemon=True)
        finisher.start()
        finisher.join(timeout_millis / 1000)
        self.exporter.shutdown()
