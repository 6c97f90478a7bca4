"""How an endpoint's answer is judged."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhooks.delivery.classify import MAX_RETRY_AFTER_SECONDS, classify, parse_retry_after


@pytest.mark.parametrize("status", [200, 201, 204, 299])
def test_any_2xx_is_delivered(status):
    assert classify(status, {}).delivered


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_a_failure_not_followed(status):
    verdict = classify(status, {"location": "http://elsewhere"})
    assert not verdict.delivered and verdict.error_class == "redirect"


def test_410_gone_disables_the_endpoint():
    verdict = classify(410, {})
    assert verdict.gone and not verdict.delivered


@pytest.mark.parametrize("status", [429, 502, 503, 504])
def test_retry_after_seconds_is_honoured_on_slow_down_statuses(status):
    assert classify(status, {"retry-after": "120"}).retry_after == 120


def test_retry_after_is_ignored_on_other_failures():
    assert classify(500, {"retry-after": "120"}).retry_after is None


def test_retry_after_as_an_http_date():
    now = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)
    value = format_datetime(now + timedelta(minutes=2), usegmt=True)
    assert parse_retry_after(value, now) == 120


@pytest.mark.parametrize("value", [None, "", "soon", "-5"])
def test_unparseable_retry_after_is_ignored(value):
    assert parse_retry_after(value) is None


def test_retry_after_is_capped_at_a_day():
    assert parse_retry_after("999999999") == MAX_RETRY_AFTER_SECONDS


def test_transport_errors_keep_their_class():
    verdict = classify(None, {}, "timeout", "read timed out")
    assert not verdict.delivered and verdict.error_class == "timeout" and "timed out" in verdict.summary


@given(st.integers(min_value=100, max_value=599))
def test_exactly_the_2xx_statuses_are_delivered(status):
    assert classify(status, {}).delivered == (200 <= status < 300)
