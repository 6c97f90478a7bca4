"""What one call to a webhook URL came to (``HttpResult``), and what its HTTP status means.

Every kind of destination answers an ``HttpResult`` (``destinations.base``): one without
HTTP statuses answers none, and an ``error_class`` only when it did not take the delivery.

The meaning of a status is decided here once: ``classify`` reads it to judge the delivery,
``window`` to judge the receiver's capacity, and the record to judge the endpoint's health.
How much of a receiver's headers is kept is decided here too (``kept_headers``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: Largest error message kept in an HttpResult (messages end up in delivery logs).
MAX_ERROR_CHARS = 300
#: Response bytes kept: the sender reads no more, and the attempt stores them (the design's first 20 KB).
MAX_BODY_BYTES = 20 * 1024
#: Characters of a response's header names and values kept per attempt, in all: a receiver
#: answering 120 headers of 8 KB had every attempt hold and store 961 KB, and a batch of 500
#: to it took the worker from 271 MB to 1,089 MB.
MAX_KEPT_HEADERS = 8 * 1024


#: The endpoint is gone: stop calling it (it is disabled).
GONE = 410
#: The receiver is busy, only busy: its endpoint is up.
TOO_MANY_REQUESTS = 429
#: The receiver says it has too much (``503`` is also what nginx's ``limit_conn`` and
#: ``limit_req`` answer): its window halves, down to one.
OVERLOAD_STATUSES = frozenset({408, TOO_MANY_REQUESTS, 503})
#: Error classes of a destination that refused a delivery for good (an SMTP 5xx to the message or
#: its recipients, ``destinations.mailto``): another attempt cannot help, so the delivery fails at
#: once instead of climbing the ladder.
FINAL_ERROR_CLASSES = frozenset({"smtp_rejected"})
#: Statuses whose ``Retry-After`` we honour: the receiver says when to come back, and a message that
#: comes back early waits again without counting an attempt (``decide``).
SLOW_DOWN_STATUSES = frozenset({TOO_MANY_REQUESTS, 502, 503, 504})


def is_success(status_code: int) -> bool:
    return 200 <= status_code < 300


def is_redirect(status_code: int) -> bool:
    """3xx: a failure (redirects are not followed)."""
    return 300 <= status_code < 400


def is_server_error(status_code: int) -> bool:
    return status_code >= 500


def counts_towards_offline(status_code: int | None) -> bool:
    """Does a failed call with this status count towards taking its endpoint offline? Not a 429."""
    return status_code != TOO_MANY_REQUESTS


def without_nul(text: str) -> str:
    """``text`` with each NUL shown as U+FFFD, as undecodable bytes already are: PostgreSQL's text
    cannot hold NUL, and one receiver's NUL (in its body, or quoted in a parser's error) failed
    the whole batch of records it was in."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def kept_headers(headers: Iterable[tuple[str, str]], budget: int = MAX_KEPT_HEADERS) -> dict[str, str]:
    """``headers`` as an attempt keeps them: names lower-cased, a repeated header's values joined
    with ", ", in the order received until ``budget`` characters of names and values are used; the
    header that crosses it is cut there and the rest are dropped."""
    kept: dict[str, str] = {}
    left = budget
    for name, value in headers:
        name = name.lower()
        joined = name in kept
        overhead = 2 if joined else len(name)
        if overhead + len(value) > left:
            room = left - overhead
            if room > 0:
                kept[name] = f"{kept[name]}, {value[:room]}" if joined else value[:room]
            break
        kept[name] = f"{kept[name]}, {value}" if joined else value
        left -= overhead + len(value)
    return kept


@dataclass(frozen=True)
class HttpResult:
    """What happened when calling a webhook URL; a response may exist even when ``error_class`` is set
    (e.g. the deadline expired while its body was still arriving).

    ``headers`` are as ``kept_headers`` keeps them (at most ``MAX_KEPT_HEADERS`` characters);
    ``body`` is at most the sender's ``max_body`` first bytes.
    """

    status_code: int | None
    headers: dict[str, str]
    body: bytes
    duration_ms: float
    error_class: str | None
    error: str | None
    #: Milliseconds of the call's phases, ``dns`` and ``connect`` (TCP and TLS), when they were timed
    #: (while tracing is on) and happened (a pooled connection has neither).
    phases: Mapping[str, float] | None = None

    @property
    def ok(self) -> bool:
        """Delivered: a 2xx, or (a destination without HTTP statuses) no status and no error."""
        return self.error_class is None and (self.status_code is None or 200 <= self.status_code < 300)
