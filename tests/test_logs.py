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


# -- credentials ---------------------------------------------------------------------------------

import io  # noqa: E402 - the credentials tests' own imports
import subprocess  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402

from webhooks import logs  # noqa: E402
from webhooks.secrecy import mask  # noqa: E402


@pytest.mark.parametrize("text, masked", [
    ("migrating postgresql://postgres:hunter2@127.0.0.1:5432/webhooks",
     "migrating postgresql://postgres:***@127.0.0.1:5432/webhooks"),
    ("amqp://a:b@h1:5672/%2F,amqps://c:d%2Ce@h2/v", "amqp://a:***@h1:5672/%2F,amqps://c:***@h2/v"),
    ("'postgresql://u:p@ss@db/x' failed", "'postgresql://u:***@db/x' failed"),  # an unencoded @ in the password
    ("smtp://user:pa:ss@mail.example:587?starttls=1&from=a%40b.c", "smtp://user:***@mail.example:587?starttls=1&from=a%40b.c"),
    ("redis://:secret@h:6379/0", "redis://:***@h:6379/0"),
    ("http://host:8080/path@v2 and mailto:a@b.c and ops@example.com", "http://host:8080/path@v2 and mailto:a@b.c and ops@example.com"),
])
def test_mask_hides_the_password_of_every_url_and_nothing_else(text: str, masked: str) -> None:
    assert mask(text) == masked


def test_mask_hides_known_secrets_as_given_and_percent_encoded() -> None:
    assert mask("535 bad p@ss! (p%40ss%21)", "p@ss!") == "535 bad *** (***)"


def test_no_log_line_shows_a_url_password_whoever_logs_it_and_however() -> None:
    logs.configure()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)  # another library's handler and format (gunicorn's, say)
    handler.setFormatter(logging.Formatter("%(asctime)s [%(process)d] [%(levelname)s] %(message)s"))
    other = logging.getLogger("gunicorn.error.test")
    other.addHandler(handler)
    other.setLevel(logging.INFO)
    other.propagate = False
    try:
        other.warning("migrating %s", "postgresql://postgres:hunter2@db:5432/webhooks")
        other.warning("broker at amqp://svc:s3cret@rabbit/%2F is down")
        other.warning("%(url)s", {"url": "smtp://u:pw0rd@mail:587"})
        try:
            raise ConnectionError("cannot reach postgresql://postgres:hunter2@db/webhooks")
        except ConnectionError:
            other.exception("start-up failed")
        other.info("attempted delivery=%s attempt=%d ms=%.0f", "dlv_1", 2, 3.5)  # nothing to mask: as is
    finally:
        other.removeHandler(handler)
    text = stream.getvalue()
    assert "hunter2" not in text and "s3cret" not in text and "pw0rd" not in text
    assert "postgresql://postgres:***@db:5432/webhooks" in text and "amqp://svc:***@rabbit/%2F" in text
    assert "ConnectionError: cannot reach postgresql://postgres:***@db/webhooks" in text
    assert text.rstrip().endswith("attempted delivery=dlv_1 attempt=2 ms=4")


def test_python_m_webhooks_secrecy_prints_a_url_masked_for_the_dev_script() -> None:
    printed = subprocess.run([sys.executable, "-m", "webhooks.secrecy", "postgresql://postgres:hunter2@db/x"],
                             capture_output=True, text=True, check=True).stdout
    assert printed == "postgresql://postgres:***@db/x\n"
