"""Logging: one line per event of interest, ``key=value`` ids in the message, to stderr.

A worker logs a line per attempt, so a line's cost counts: with the standard library's
defaults one took 16-29 us of CPU here, 5-10 % of what a delivery costs the worker. About
40 % of that was gathering what ``FORMAT`` never prints (the caller's file and line, found by
walking the stack; the thread, process and task names) and formatting the time from
scratch for every line. ``configure`` turns that gathering off, as the logging HOWTO's
"Optimization" section describes, and the formatter reuses the time's text within a
second.
"""

from __future__ import annotations

import logging
import os
import time

#: Format shared by every process, so the Procfile's combined output lines up.
FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class Formatter(logging.Formatter):
    """``FORMAT``'s formatter, with the date and time to the second formatted once per second."""

    def __init__(self, fmt: str = FORMAT) -> None:
        super().__init__(fmt)
        self._second: int | None = None
        self._text = ""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 - logging's name
        second = int(record.created)
        if second != self._second:
            self._second, self._text = second, time.strftime(self.default_time_format, self.converter(second))
        return self.default_msec_format % (self._text, record.msecs)


def configure() -> None:
    """Configure the root logger once (``LOG_LEVEL``, default INFO); quiet chatty libraries."""
    root = logging.getLogger()
    if getattr(root, "_webhooks_configured", False):
        return
    # Nothing in FORMAT needs these; each costs every record its lookup.
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging.logAsyncioTasks = False
    logging._srcfile = None  # no stack walk for the caller's file and line
    handler = logging.StreamHandler()
    handler.setFormatter(Formatter())
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "INFO").upper(), handlers=[handler])
    for noisy in ("pika", "httpx", "httpcore", "peewee"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    root._webhooks_configured = True  # type: ignore[attr-defined]
