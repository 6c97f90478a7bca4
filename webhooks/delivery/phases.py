"""How long a call's DNS lookup and connection took, for its attempt span (issue 35).

aiohttp tells a ``TraceConfig`` when it starts and ends resolving a host and opening a
connection (TCP and TLS); ``phase_tracing()`` turns those signals into milliseconds written
into the dict each request passes as its ``trace_request_ctx``. A call on a pooled
connection has neither phase (nothing was resolved or opened); a lookup the resolver had
cached has no ``dns``. Only installed while tracing is on: with it off, aiohttp sends no
signals at all and the call costs what it did.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import aiohttp

#: The phases timed, by the aiohttp signals that start and end them.
PHASES = {"dns": ("on_dns_resolvehost_start", "on_dns_resolvehost_end"),
          "connect": ("on_connection_create_start", "on_connection_create_end")}


def phase_tracing() -> aiohttp.TraceConfig:
    """A TraceConfig writing ``{"dns": ms, "connect": ms}`` into each request's ``trace_request_ctx`` dict."""
    config = aiohttp.TraceConfig(trace_config_ctx_factory=_context)
    for phase, (start, end) in PHASES.items():
        getattr(config, start).append(_starter(phase))
        getattr(config, end).append(_ender(phase))
    return config


def _context(trace_request_ctx: dict[str, float] | None = None) -> SimpleNamespace:
    return SimpleNamespace(timings=trace_request_ctx, started={})


def _starter(phase: str) -> Any:
    async def started(_session: Any, context: SimpleNamespace, _params: Any) -> None:
        context.started[phase] = time.monotonic()
    return started


def _ender(phase: str) -> Any:
    async def ended(_session: Any, context: SimpleNamespace, _params: Any) -> None:
        began = context.started.pop(phase, None)
        if began is not None and context.timings is not None:
            context.timings[phase] = round((time.monotonic() - began) * 1000.0, 3)
    return ended
