"""In the web server a platform key takes a turn per tenant it acts for (``webhooks.server``): the head
of a request under /v1/tenants/<id or uid>/ names that tenant, so one customer's burst sent by the
platform waits behind that customer's own requests, not behind every other customer's."""

from __future__ import annotations

import pytest

from webhooks.server.framing import RequestReader


def head_of(request_line: bytes) -> RequestReader:
    reader = RequestReader(1000)
    reader.feed(request_line + b"\r\nHost: x\r\nAuthorization: Bearer key_1.s\r\n\r\n")
    assert reader.complete and reader.head is not None
    return reader


@pytest.mark.parametrize(("line", "tenant"), [
    (b"POST /v1/tenants/cus_42/events HTTP/1.1", "cus_42"),
    (b"GET /v1/tenants/ten_01m8ckwe2wa0cd94wthx7daj04/endpoints?limit=5 HTTP/1.1", "ten_01m8ckwe2wa0cd94wthx7daj04"),
    (b"GET /v1/tenants/cus_42?x=1 HTTP/1.1", "cus_42"),
    (b"GET /v1/tenants HTTP/1.1", None),
    (b"POST /v1/events HTTP/1.1", None),
    (b"GET /portal/v1/tenants/x/ HTTP/1.1", None),
])
def test_the_head_names_the_tenant_a_request_acts_for(line: bytes, tenant: str | None) -> None:
    head = head_of(line).head
    assert head is not None and head.acting_for == tenant and head.authorization == "Bearer key_1.s"
