"""The one sender interface: every endpoint URL's scheme picks its kind of destination.

(HTTP's own behaviour is in test_sender.py; each further kind has its own end-to-end file.)
"""

from __future__ import annotations

import asyncio
import logging
import re

import pytest

from tests.receivers import Receiver
from webhooks.delivery.classify import classify
from webhooks.delivery.destinations import Destinations, Kind, Parcel, URL_PATTERN, check_target, kind_of, split_target
from webhooks.delivery.http_result import HttpResult
from webhooks.delivery.netguard import BlockedAddress, TargetPolicy
from webhooks.delivery.outgoing import build_request
from webhooks.delivery.window import Signal, signal_of
from webhooks import metrics
from webhooks.delivery.destinations import kept

SECRET = "whsec_" + "A" * 32


def parcel() -> Parcel:
    request = build_request("evt_1", "order.paid", "2026-11-26T00:00:00Z", {"n": 1}, [SECRET], 1_700_000_000)
    return Parcel("evt_1", "order.paid", request)


def test_an_http_url_is_delivered_as_a_signed_post_as_before() -> None:
    async def deliver(url: str) -> object:
        destinations = Destinations.open(timeout=5, policy=TargetPolicy(allow_private=True))
        try:
            return await destinations.deliver(url, parcel())
        finally:
            await destinations.close()

    with Receiver() as receiver:
        result = asyncio.run(deliver(receiver.url + "/hook"))
        (request,) = receiver.wait_for(1, timeout=5)

    assert result.status_code == 200 and result.error_class is None
    assert request.headers["webhook-id"] == "evt_1" and request.body == parcel().request.body


def test_a_url_of_no_kind_fails_as_a_protocol_error_without_raising() -> None:
    async def deliver() -> object:
        destinations = Destinations.open(timeout=5, policy=TargetPolicy())
        try:
            return await destinations.deliver("ftp://example.com/x", parcel())
        finally:
            await destinations.close()

    result = asyncio.run(deliver())

    assert result.status_code is None and result.error_class == "protocol"
    assert "no destination of kind 'ftp'" in (result.error or "")


class Broken:
    """A kind with a bug: it raises where it should answer a result."""

    kind = Kind(name="Broken", schemes=("broken",), pattern="^broken:.*$", split=lambda url: ("broken", "", 0))

    async def deliver(self, url: str, parcel: Parcel) -> HttpResult:
        raise KeyError("amqp://user:hunter2@example.com")

    async def close(self) -> None:
        pass


def test_a_kind_that_raises_is_a_failed_attempt_the_ladder_retries_with_the_traceback_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def deliver() -> HttpResult:
        return await Destinations([Broken()]).deliver("broken:x", parcel())

    with caplog.at_level(logging.ERROR, logger="webhooks.delivery.destinations.router"):
        result = asyncio.run(deliver())
    verdict = classify(result.status_code, result.headers, result.error_class, result.error)

    assert result.error_class == "internal" and "Broken destination (KeyError)" in (result.error or "")
    assert "hunter2" not in (result.error or "")  # the exception's text is the log's alone
    assert not verdict.delivered and not verdict.final  # up the ladder, like any failure
    assert signal_of(result.status_code, result.error_class) is Signal.NEUTRAL  # says nothing of the endpoint's load
    (record,) = caplog.records
    assert "event=evt_1" in record.getMessage() and record.exc_info is not None


def test_an_answer_without_a_status_or_an_error_is_a_delivery_the_window_counts_as_answered() -> None:
    verdict = classify(None, {}, None, None)

    assert verdict.delivered and verdict.error_class is None and verdict.summary == "accepted"
    assert signal_of(None, None) is Signal.ANSWERED
    assert signal_of(None, "connection") is Signal.FAILED


def test_an_accepted_attempt_is_counted_apart_from_errors() -> None:
    accepted = metrics.ATTEMPTS.labels("accepted")
    before = accepted._value.get()

    metrics.observe_attempt(None, None, 0.01, "delivered")

    assert accepted._value.get() == before + 1


@pytest.mark.parametrize("url", ["ftp://example.com/hook", "example.com/hook", "gopher://b.example"])
def test_registration_refuses_a_scheme_of_no_kind_naming_the_schemes_there_are(url: str) -> None:
    with pytest.raises(ValueError, match="URL scheme must be "):
        check_target(url, TargetPolicy(allow_private=True))
    assert not re.match(URL_PATTERN, url)


def test_an_http_url_is_the_http_kind_and_its_host_is_checked_by_the_ssrf_rules() -> None:
    assert kind_of("HTTPS://example.com/x").name == "HTTP"
    assert split_target("https://example.com/x") == ("https", "example.com", 443)
    with pytest.raises(BlockedAddress, match="loopback"):
        check_target("http://127.0.0.1:9/hook", TargetPolicy())


def test_kept_connections_are_reused_and_handed_back_once_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(kept.time, "monotonic", lambda: now[0])
    pool: kept.Kept[object] = kept.Kept()
    with pool.use("redis://a", object) as first:
        pass
    with pool.use("redis://a", object) as again, pool.use("redis://b", object) as busy:
        now[0] += kept.IDLE_SECONDS + kept.SWEEP_SECONDS + 1
        idle_while_b_busy = pool.idle()

    assert again is first
    assert idle_while_b_busy == []  # both are in use
    now[0] += kept.IDLE_SECONDS + kept.SWEEP_SECONDS + 1
    assert sorted(map(id, pool.idle())) == sorted([id(first), id(busy)])
    with pool.use("redis://a", object) as fresh:
        assert fresh is not first
