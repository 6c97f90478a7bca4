"""Log lines: the service's formatter writes exactly what the standard one would, more cheaply."""

from __future__ import annotations

import logging

from webhooks.logs import FORMAT, Formatter


def record(created: float, message: str = "attempted delivery=%s") -> logging.LogRecord:
    line = logging.LogRecord("webhooks.delivery.attempt", logging.INFO, "attempt.py", 1, message, ("dlv_1",), None)
    line.created, line.msecs = created, (created - int(created)) * 1000
    return line


def test_lines_read_as_the_standard_formatters_within_a_second_and_across_seconds() -> None:
    ours, standard = Formatter(), logging.Formatter(FORMAT)
    times = [1_795_600_000.001, 1_795_600_000.5, 1_795_600_000.999, 1_795_600_001.0, 1_795_600_061.25, 1_795_600_000.75]

    assert [ours.format(record(t)) for t in times] == [standard.format(record(t)) for t in times]


def test_a_line_names_its_time_level_logger_and_message() -> None:
    line = Formatter().format(record(1_795_600_000.042))

    assert line.endswith(",042 INFO webhooks.delivery.attempt attempted delivery=dlv_1")
