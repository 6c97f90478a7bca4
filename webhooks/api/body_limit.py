"""Request bodies held to ``MAX_BODY_BYTES`` (``MAX_CONTENT_LENGTH``), with a length or sent chunked.

A body with a ``Content-Length`` over the limit is a 413 before anything reads it
(``reject_oversized_body``). One sent without a length (``Transfer-Encoding: chunked``) is
measured as it is read (``Request``): Werkzeug's stream stops at the limit and says nothing,
so the JSON parser got the first 256 KB of a larger body and answered ``400 Invalid JSON
body: Unterminated string``; here the stream looks one byte past the limit and answers 413.
"""

from __future__ import annotations

from typing import IO

import flask
from flask import current_app, request
from flask_smorest import abort
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.utils import cached_property
from werkzeug.wsgi import LimitedStream

from webhooks.errors import Refused


def too_large(limit: int) -> str:
    """What a 413 says."""
    return f"request body too large: at most {limit} bytes"


def reject_oversized_body() -> None:
    """413 as soon as ``Content-Length`` exceeds ``MAX_CONTENT_LENGTH``, before anything reads the body."""
    limit = current_app.config.get("MAX_CONTENT_LENGTH")
    length = request.content_length
    if limit is not None and length is not None and length > limit:
        abort(413, message=too_large(limit))


class BodyTooLarge(RequestEntityTooLarge, Refused):
    """A body sent without a length went past the limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(too_large(limit))


class CappedStream(LimitedStream):
    """A stream of at most ``limit`` bytes that raises ``BodyTooLarge`` if the body goes on past it
    (Werkzeug's ``is_max`` stream stops reading at the limit as if the body ended there)."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        super().__init__(stream, limit, is_max=True)
        self._source = stream

    def on_exhausted(self) -> None:
        if self._source.read(1):
            raise BodyTooLarge(self.limit)

    def readall(self) -> bytes:
        data = super().readall()
        if self.is_exhausted:
            self.on_exhausted()
        return data


class Request(flask.Request):
    """Flask's request, with a body sent without a length held to the limit as one with a length is."""

    @cached_property
    def stream(self) -> IO[bytes]:
        limit = self.max_content_length
        if limit is not None and self.content_length is None and self.environ.get("wsgi.input_terminated"):
            return CappedStream(self.environ["wsgi.input"], limit)
        return super().stream
