"""Logging: one line per event of interest, ``key=value`` ids in the message, to stderr.

A worker logs a line per attempt, so a line's cost counts: with the standard library's
defaults one took 16-29 us of CPU here, 5-10 % of what a delivery costs the worker. About
40 % of that was gathering what ``FORMAT`` never prints (the caller's file and line, found by
walking the stack; the thread and task names) and formatting the time from scratch for
every line. ``configure`` turns that gathering off, as the logging HOWTO's "Optimization"
section describes, and the formatter reuses the time's text within a second. The process
id stays on: it costs a ``getpid`` and other formatters print it (gunicorn's
``[%(process)d]``: without it, each of its lines was a ``--- Logging error ---`` block).

No line shows a credential: ``configure`` has every record, whoever's logger made it
(gunicorn's too), pass ``webhooks.secrecy.mask`` over its message and traceback as it is
made (``mask_record``). A record that cannot hold one (no ``@`` in its message or
arguments) costs a few checks.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable, Optional

from webhooks.secrecy import mask

#: Format shared by every process, so the Procfile's combined output lines up.
FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class Formatter(logging.Formatter):
    """``FORMAT``'s formatter, with the date and time to the second formatted once per second."""

    def __init__(self, fmt: str = FORMAT) -> None:
        super().__init__(fmt)
        self._second: int | None = None
        self._text = ""

    def format(self, record: logging.LogRecord) -> str:
        """``FORMAT``'s line, naming the trace and span current while it was written (when tracing is on)."""
        text = super().format(record)
        ids = _trace_ids() if _trace_ids is not None else None
        if ids is None:
            return text
        first, newline, rest = text.partition("\n")  # a traceback follows the line that names them
        return f"{first} trace_id={ids[0]} span_id={ids[1]}{newline}{rest}"

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 - logging's name
        second = int(record.created)
        if second != self._second:
            self._second, self._text = second, time.strftime(self.default_time_format, self.converter(second))
        return self.default_msec_format % (self._text, record.msecs)


#: Gives ``(trace_id, span_id)`` of the span current in this thread, or None (``set_trace_ids``).
_trace_ids: Optional[Callable[[], Optional[tuple[str, str]]]] = None


def set_trace_ids(source: Optional[Callable[[], Optional[tuple[str, str]]]]) -> None:
    """Have every line name the trace and span current when it is written (``webhooks.observability.tracing``)."""
    global _trace_ids
    _trace_ids = source


def mask_record(record: logging.LogRecord) -> logging.LogRecord:
    """Mask credentials in ``record``'s message and traceback (``webhooks.secrecy``), in place."""
    if _may_hold_credentials(record.msg, record.args):
        message = record.getMessage()
        masked = mask(message)
        if masked != message:
            record.msg, record.args = masked, None
    if record.exc_info and record.exc_text is None:
        record.exc_text = mask(_PLAIN.formatException(record.exc_info))
    return record


#: Formats tracebacks for ``mask_record`` (as every standard formatter does).
_PLAIN = logging.Formatter()


def _may_hold_credentials(msg: object, args: object) -> bool:
    """Whether a record's message, once formatted, may hold a URL with a password (``@``)."""
    if "@" in str(msg):
        return True
    values = args.values() if isinstance(args, dict) else args if isinstance(args, tuple) else ()
    return any(not isinstance(value, (int, float)) and "@" in str(value) for value in values)


def _masking(factory: Callable[..., logging.LogRecord]) -> Callable[..., logging.LogRecord]:
    """``factory``, with every record it makes through ``mask_record``."""
    def make(*args: Any, **kwargs: Any) -> logging.LogRecord:
        return mask_record(factory(*args, **kwargs))

    make.webhooks_masking = True  # type: ignore[attr-defined]
    return make


def configure() -> None:
    """Configure the root logger once (``LOG_LEVEL``, default INFO); quiet chatty libraries."""
    root = logging.getLogger()
    if getattr(root, "_webhooks_configured", False):
        return
    # Nothing in FORMAT needs these; each costs every record its lookup. (Not the process id:
    # gunicorn's own lines, in the web process, print it.)
    logging.logThreads = logging.logMultiprocessing = False
    logging.logAsyncioTasks = False
    logging._srcfile = None  # no stack walk for the caller's file and line
    if not getattr(logging.getLogRecordFactory(), "webhooks_masking", False):
        logging.setLogRecordFactory(_masking(logging.getLogRecordFactory()))
    handler = logging.StreamHandler()
    handler.setFormatter(Formatter())
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "INFO").upper(), handlers=[handler])
    for noisy in ("pika", "httpx", "httpcore", "peewee"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    root._webhooks_configured = True  # type: ignore[attr-defined]
