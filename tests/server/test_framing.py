"""Where a request ends: the server hands a thread only whole requests, and refuses what it cannot frame."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from webhooks.server.framing import CONTINUE, MAX_CHUNK_LINE_BYTES, RequestReader

HEAD = b"POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key_1.s\r\n"


def fed(*pieces: bytes, max_body: int | None = 1000) -> RequestReader:
    reader = RequestReader(max_body)
    for piece in pieces:
        assert reader.feed(piece) is None
    return reader


def test_a_request_without_a_body_is_whole_once_its_head_ends() -> None:
    reader = fed(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    assert not reader.complete and reader.started

    reader.feed(b"\r\n")

    assert reader.complete
    assert reader.request() == b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"


def test_a_body_by_content_length_is_whole_at_its_last_byte_however_it_arrives() -> None:
    request = HEAD + b"Content-Length: 10\r\n\r\n" + b"0123456789"
    reader = RequestReader(1000)
    for i in range(len(request) - 1):
        reader.feed(request[i:i + 1])
        assert not reader.complete
    reader.feed(request[-1:])

    assert reader.complete and reader.request() == request
    assert reader.head is not None and reader.head.authorization == "Bearer key_1.s"


def test_a_chunked_body_is_whole_after_its_last_chunk_and_trailers() -> None:
    body = b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n"
    request = HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + body
    reader = RequestReader(1000)
    for i in range(len(request)):
        assert not reader.complete
        assert reader.feed(request[i:i + 1]) is None

    assert reader.complete and reader.request() == request


@given(st.lists(st.binary(min_size=1, max_size=40), max_size=6), st.integers(min_value=1, max_value=50))
def test_any_chunking_of_any_body_is_framed_exactly(chunks: list[bytes], piece: int) -> None:
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for chunk in chunks) + b"0\r\n\r\n"
    request = HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + body
    following = b"GET /next HTTP/1.1\r\n\r\n"
    reader = RequestReader(10_000)
    stream = request + following
    for i in range(0, len(stream), piece):
        assert reader.feed(stream[i:i + piece]) is None
    assert reader.complete and reader.request() == request
    assert reader.next_reader().request() == following


def test_bytes_after_the_request_start_the_next_one() -> None:
    reader = fed(b"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\nGET /c")

    assert reader.request() == b"GET /a HTTP/1.1\r\n\r\n"
    second = reader.next_reader()
    assert second.complete and second.request() == b"GET /b HTTP/1.1\r\n\r\n"
    third = second.next_reader()
    assert third.started and not third.complete


def test_empty_lines_before_a_request_are_skipped_and_an_idle_connection_has_not_started() -> None:
    reader = fed(b"\r\n\r\n")
    assert not reader.started
    reader.feed(b"GET / HTTP/1.1\r\n\r\n")
    assert reader.complete and reader.request() == b"GET / HTTP/1.1\r\n\r\n"


def test_a_body_over_the_limit_is_refused_with_413_from_its_announced_length_before_any_of_it() -> None:
    refusal = RequestReader(1000).feed(HEAD + b"Content-Length: 1001\r\n\r\n")

    assert refusal is not None and refusal.status == 413
    assert refusal.message == "request body too large: at most 1000 bytes"


def test_a_chunked_body_over_the_limit_is_refused_with_413_at_the_chunk_that_passes_it() -> None:
    reader = fed(HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + b"3e8\r\n" + b"x" * 1000 + b"\r\n")

    refusal = reader.feed(b"1\r\n")

    assert refusal is not None and refusal.status == 413


def test_a_head_over_the_limit_is_refused_with_431() -> None:
    reader = RequestReader(1000, max_head=100)
    assert reader.feed(b"GET / HTTP/1.1\r\n" + b"X: " + b"a" * 60 + b"\r\n") is None

    refusal = reader.feed(b"Y: " + b"b" * 40 + b"\r\n")

    assert refusal is not None and refusal.status == 431
    assert refusal.message == "request headers too large: at most 100 bytes in all"


@pytest.mark.parametrize(("headers", "status"), [
    (b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", 400),
    (b"Content-Length: 5\r\nContent-Length: 6\r\n", 400),
    (b"Content-Length: -1\r\n", 400),
    (b"Content-Length: 0x10\r\n", 400),
    (b"Transfer-Encoding: gzip, chunked\r\n", 501),
])
def test_a_body_whose_end_cannot_be_told_is_refused(headers: bytes, status: int) -> None:
    refusal = RequestReader(1000).feed(HEAD + headers + b"\r\n")
    assert refusal is not None and refusal.status == status


@pytest.mark.parametrize("body", [b"zz\r\n", b"5\r\nhello!!\r\n", b"1" * (MAX_CHUNK_LINE_BYTES + 1)])
def test_a_malformed_chunked_body_is_refused_with_400(body: bytes) -> None:
    refusal = RequestReader(100_000).feed(HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + body)
    assert refusal is not None and refusal.status == 400


def test_expect_100_continue_is_answered_once_here_and_not_passed_on() -> None:
    reader = fed(HEAD + b"Expect: 100-continue\r\nContent-Length: 2\r\n\r\n")
    assert reader.send_continue and CONTINUE == b"HTTP/1.1 100 Continue\r\n\r\n"
    reader.send_continue = False

    reader.feed(b"{}")

    assert reader.complete and not reader.send_continue
    assert b"expect" not in reader.request().lower()
    assert reader.request().endswith(b"Content-Length: 2\r\n\r\n{}")


def test_expect_100_continue_on_a_request_refused_for_its_size_gets_the_refusal_only() -> None:
    reader = RequestReader(10)
    refusal = reader.feed(HEAD + b"Expect: 100-continue\r\nContent-Length: 11\r\n\r\n")
    assert refusal is not None and refusal.status == 413 and not reader.send_continue
