"""Where an HTTP/1.1 request ends: its head, then a body by ``Content-Length`` or chunked.

``RequestReader`` is fed the bytes of a connection as they arrive and says when one whole
request (head and body) is there, so that the web process hands a request to a thread only
once nothing more has to be read for it (``webhooks.server.worker``). It reads the few
headers framing depends on and leaves every other check to gunicorn's own parser, which
parses the same bytes again in the thread: a request the reader cannot frame is answered
here (400, 413, 431, 501) before anything waits for it.

Bytes after the request (a pipelined next request) stay in the reader: ``next_reader``
starts the next request with them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The head's size in all (request line and headers) before it is refused with 431. gunicorn's
#: own limits (a line of 4,094 bytes, a field of 8,190, 100 fields) still apply in the thread.
MAX_HEAD_BYTES = 64 * 1024

#: A chunk-size line (with its extensions), or a trailer line, longer than this is malformed.
MAX_CHUNK_LINE_BYTES = 4096

#: The interim answer to ``Expect: 100-continue``: sent as soon as the head is in, so the
#: client sends its body to be buffered (the head handed on no longer carries the ``Expect``).
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"

#: The tenant a platform key acts for, from the request target ``/v1/tenants/<id or uid>/…``.
ACTING_FOR = re.compile(rb"[A-Z]+ /v1/tenants/([^/?# ]+)")

HEX_DIGITS = re.compile(rb"[0-9A-Fa-f]{1,16}")
DIGITS = re.compile(rb"[0-9]{1,18}")


@dataclass(frozen=True)
class Refusal:
    """A request that is answered without being handed on: its status, what to tell the client,
    and whether the connection must close (its framing is lost)."""

    status: int
    message: str


@dataclass(frozen=True)
class Head:
    """What the server needs from a request's head: who sends it (for turns) and how its body is framed."""

    authorization: str | None
    cookie: str | None
    #: The tenant a request under ``/v1/tenants/<id or uid>/`` names: a platform key takes a turn per tenant.
    acting_for: str | None
    content_length: int | None
    chunked: bool
    expects_continue: bool


class RequestReader:
    """One request's bytes as they arrive; ``feed`` says whether it is whole, or refused.

    ``max_body`` is the body's limit in bytes (``MAX_BODY_BYTES``); a longer one is refused with
    413 as soon as its length is known (at once for ``Content-Length``, at the chunk that passes
    it for a chunked body), without reading the rest.
    """

    def __init__(self, max_body: int | None, data: bytes = b"", max_head: int = MAX_HEAD_BYTES) -> None:
        self.max_body, self.max_head = max_body, max_head
        self.buffer = bytearray()
        self.head: Head | None = None
        self.started = False  #: a byte of this request has arrived (leading empty lines aside)
        self.send_continue = False  #: ``CONTINUE`` should be sent now (once)
        self._head_end = 0  # where the body starts
        self._head_bytes = b""  # the head as handed on (without ``Expect``)
        self._end: int | None = None  # where the request ends, once known
        self._chunk_at = 0  # chunked: where the next chunk-size (or trailer) line starts
        self._chunked_size = 0  # chunked: the body's size in the chunks passed so far
        self._trailers = False
        self._trailer_start = 0
        if data:
            self.feed(data)

    @property
    def complete(self) -> bool:
        return self._end is not None

    def feed(self, data: bytes) -> Refusal | None:
        """Take more of the connection's bytes; a ``Refusal`` if the request cannot be taken."""
        self.buffer += data
        if not self.started:
            while self.buffer[:2] == b"\r\n":  # empty lines before a request are ignored (RFC 9112 2.2)
                del self.buffer[:2]
            self.started = bool(self.buffer)
        if self.head is None:
            refusal = self._read_head()
            if refusal is not None or self.head is None:
                return refusal
        if self._end is None:
            return self._read_body()
        return None

    def method_and_path(self) -> tuple[str, str] | None:
        """The request line's method and path (the query left out: it may hold secrets), once it has
        arrived whole; for the span of a request refused here."""
        end = self.buffer.find(b"\r\n", 0, MAX_CHUNK_LINE_BYTES)
        parts = bytes(self.buffer[:end]).split(b" ") if end > 0 else []
        if len(parts) != 3:
            return None
        return parts[0].decode("latin-1")[:16], parts[1].partition(b"?")[0].decode("latin-1")[:256]

    def request(self) -> bytes:
        """The whole request as gunicorn is to parse it (``complete`` must be true)."""
        assert self._end is not None
        return self._head_bytes + bytes(self.buffer[self._head_end:self._end])

    def next_reader(self) -> RequestReader:
        """A reader for the next request on the connection, with the bytes already received for it."""
        assert self._end is not None
        return RequestReader(self.max_body, bytes(self.buffer[self._end:]), self.max_head)

    def _read_head(self) -> Refusal | None:
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buffer) > self.max_head:
                return Refusal(431, f"request headers too large: at most {self.max_head} bytes in all")
            return None
        if end + 4 > self.max_head:
            return Refusal(431, f"request headers too large: at most {self.max_head} bytes in all")
        lines = bytes(self.buffer[:end]).split(b"\r\n")
        fields: dict[bytes, list[bytes]] = {}
        kept = [lines[0]]
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            name = name.strip().lower()
            if colon and name == b"expect" and value.strip().lower() == b"100-continue":
                continue  # answered here; gunicorn would answer it a second time
            fields.setdefault(name, []).append(value.strip())
            kept.append(line)
        self._head_end = end + 4
        self._head_bytes = b"\r\n".join(kept) + b"\r\n\r\n"
        return self._frame(lines[0], fields, expects_continue=len(kept) < len(lines))

    def _frame(self, request_line: bytes, fields: dict[bytes, list[bytes]], expects_continue: bool) -> Refusal | None:
        lengths, codings = fields.get(b"content-length", []), fields.get(b"transfer-encoding", [])
        chunked = False
        if codings:
            if lengths:
                return Refusal(400, "a request may not have both Content-Length and Transfer-Encoding")
            names = [c.strip().lower() for value in codings for c in value.split(b",") if c.strip()]
            if names != [b"chunked"]:
                return Refusal(501, "the only Transfer-Encoding supported is chunked")
            chunked = True
        length = None
        if lengths:
            if len(set(lengths)) != 1 or not DIGITS.fullmatch(lengths[0]):
                return Refusal(400, "invalid Content-Length")
            length = int(lengths[0])
            if self.max_body is not None and length > self.max_body:
                return Refusal(413, f"request body too large: at most {self.max_body} bytes")
        has_body = chunked or bool(length)
        http11 = request_line.rstrip().endswith(b"HTTP/1.1")
        self.head = Head(
            authorization=_text(fields.get(b"authorization")), cookie=_text(fields.get(b"cookie")),
            acting_for=_acting_for(request_line), content_length=length, chunked=chunked, expects_continue=expects_continue,
        )
        self.send_continue = expects_continue and has_body and http11
        self._chunk_at = self._head_end
        if not has_body:
            self._end = self._head_end
        return None

    def _read_body(self) -> Refusal | None:
        assert self.head is not None
        if not self.head.chunked:
            end = self._head_end + (self.head.content_length or 0)
            if len(self.buffer) >= end:
                self._end = end
            return None
        return self._read_chunks()

    def _read_chunks(self) -> Refusal | None:
        """Walk the chunks received so far; the request ends after the last chunk's trailers."""
        buffer = self.buffer
        while True:
            line_end = buffer.find(b"\r\n", self._chunk_at)
            if line_end < 0:
                if len(buffer) - self._chunk_at > MAX_CHUNK_LINE_BYTES:
                    return Refusal(400, "malformed chunked body: a line too long")
                return None
            if self._trailers:  # trailer lines up to an empty one
                if line_end == self._chunk_at:
                    self._end = line_end + 2
                    return None
                self._chunk_at = line_end + 2
                if self._chunk_at - self._trailer_start > self.max_head:
                    return Refusal(431, f"request trailers too large: at most {self.max_head} bytes in all")
                continue
            size_text = bytes(buffer[self._chunk_at:line_end]).partition(b";")[0].strip()
            if not HEX_DIGITS.fullmatch(size_text):
                return Refusal(400, "malformed chunked body: invalid chunk size")
            size = int(size_text, 16)
            if self.max_body is not None and self._chunked_size + size > self.max_body:
                return Refusal(413, f"request body too large: at most {self.max_body} bytes")
            if size == 0:
                self._trailers = True
                self._trailer_start = self._chunk_at = line_end + 2
                continue
            data_end = line_end + 2 + size
            if len(buffer) < data_end + 2:
                return None
            if buffer[data_end:data_end + 2] != b"\r\n":
                return Refusal(400, "malformed chunked body: a chunk longer than its size")
            self._chunked_size += size
            self._chunk_at = data_end + 2


def _acting_for(request_line: bytes) -> str | None:
    match = ACTING_FOR.match(request_line)
    return match.group(1).decode("latin-1") if match else None


def _text(values: list[bytes] | None) -> str | None:
    return values[0].decode("latin-1") if values else None
