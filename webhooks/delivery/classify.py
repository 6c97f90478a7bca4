"""What an endpoint's answer means: delivered, retry (maybe not before a time), or gone.

Pure rules, no I/O: 2xx is success, and so is no status and no error (a destination
without HTTP statuses, such as a Redis stream, took the delivery); 3xx is a failure (redirects are not followed);
410 means the endpoint is gone; 429/502/503/504 with ``Retry-After`` ask us to slow down;
an error of ``FINAL_ERROR_CLASSES`` (an SMTP 5xx) is final: no further ladder attempt
(what each status and class means is decided in ``http_result``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

from webhooks.delivery.http_result import FINAL_ERROR_CLASSES, GONE, SLOW_DOWN_STATUSES, is_redirect, is_success

#: A receiver answering with this header (value ``disable``) asks to be disabled.
DISABLE_HEADER = "webhook-delivery"

#: ``Retry-After`` is capped: a receiver cannot park a delivery for longer than this (s).
MAX_RETRY_AFTER_SECONDS = 24 * 3600.0


@dataclass(frozen=True)
class Verdict:
    delivered: bool
    #: The endpoint answered 410 Gone (or asked to be disabled): stop calling it.
    #: Set together with ``delivered`` when a 2xx carried ``webhook-delivery: disable``.
    gone: bool = False
    #: Seconds the receiver asked us to wait before the next attempt.
    retry_after: float | None = None
    error_class: str | None = None
    #: One line for the delivery's ``last_error`` and the logs.
    summary: str = ""
    #: The destination refused for good (``FINAL_ERROR_CLASSES``): the ladder ends with this attempt.
    final: bool = False


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds from a ``Retry-After`` value (delta-seconds or an HTTP date), capped at 24 h."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    if value.isdigit():
        seconds = float(value)
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - (now or datetime.now(timezone.utc))).total_seconds()
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_SECONDS)


def classify(
    status_code: int | None,
    headers: dict[str, str],
    error_class: str | None = None,
    error: str | None = None,
    now: datetime | None = None,
) -> Verdict:
    """Judge one attempt from its status code and headers, or its transport error."""
    if status_code is None:
        if error_class is None:  # a destination without HTTP statuses (a Redis stream) took it
            return Verdict(True, summary="accepted")
        return Verdict(False, error_class=error_class or "connection", summary=f"{error_class}: {error}",
                       final=error_class in FINAL_ERROR_CLASSES)
    if headers.get(DISABLE_HEADER, "").strip().lower() == "disable":
        delivered = is_success(status_code)
        summary = f"HTTP {status_code} with {DISABLE_HEADER}: disable: endpoint disabled"
        return Verdict(delivered, gone=True, error_class=None if delivered else "http_status", summary=summary)
    if is_success(status_code):
        return Verdict(True, summary=f"HTTP {status_code}")
    if status_code == GONE:
        return Verdict(False, gone=True, error_class="http_status", summary="HTTP 410 Gone: endpoint disabled")
    retry_after = None
    if status_code in SLOW_DOWN_STATUSES:
        retry_after = parse_retry_after(headers.get("retry-after"), now)
    kind = "redirect" if is_redirect(status_code) else "http_status"
    summary = f"HTTP {status_code}" + (" (redirects are not followed)" if kind == "redirect" else "")
    return Verdict(False, retry_after=retry_after, error_class=kind, summary=summary)
