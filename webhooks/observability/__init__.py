"""Observability: OpenTelemetry traces (``tracing``, ``export``, ``web_spans``, ``attempt_spans``).

Every stage reads it (ingest, messaging and delivery make spans), so it sits beside the helpers
at the start of the path. May import: the helpers (``logs``) and libraries; nothing else of ours
(the entry points hand ``tracing.configure`` the counter of dropped spans from ``metrics``).
"""
