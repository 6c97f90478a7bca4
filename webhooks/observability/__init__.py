"""Observability: OpenTelemetry traces (``tracing``, ``export``, ``web_spans``, ``attempt_spans``)."""
