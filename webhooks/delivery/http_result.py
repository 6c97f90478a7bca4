"""What one call to a webhook URL came to: ``HttpResult``, and the error classes it may carry."""

from __future__ import annotations

from dataclasses import dataclass

#: Largest error message kept in an HttpResult (messages end up in delivery logs).
MAX_ERROR_CHARS = 300
#: Response bytes kept: the sender reads no more, and the attempt stores them (the design's first 20 KB).
MAX_BODY_BYTES = 20 * 1024


def without_nul(text: str) -> str:
    """``text`` with each NUL shown as U+FFFD, as undecodable bytes already are: PostgreSQL's text
    cannot hold NUL, and one receiver's NUL (in its body, or quoted in a parser's error) failed
    the whole batch of records it was in."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


@dataclass(frozen=True)
class HttpResult:
    """What happened when calling a webhook URL; a response may exist even when ``error_class`` is set
    (e.g. the deadline expired while its body was still arriving).

    ``headers`` are lower-cased, a repeated header's values joined with ", "; ``body`` is at most the
    sender's ``max_body`` first bytes.
    """

    status_code: int | None
    headers: dict[str, str]
    body: bytes
    duration_ms: float
    error_class: str | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error_class is None and self.status_code is not None and 200 <= self.status_code < 300
