"""Pure text helpers of the console: tiers, who asked or acted, failure causes in words, times typed in forms.

(Times, durations and JSON for people are the page kit's: ``webhooks.pages.text``.)
"""

from __future__ import annotations

from datetime import datetime, timedelta
from http import HTTPStatus

from webhooks.delivery.http_result import GONE, TOO_MANY_REQUESTS, is_redirect, is_server_error
from webhooks.durations import name_ms, parse_seconds
from webhooks.messaging.ladder import Ladder
from webhooks.storage.statuses import LADDER_STATUSES
from webhooks.storage.timeutil import to_naive_utc


def tier_label(ladder_no: int, trigger: str, ladder: Ladder) -> str:
    """Which tier an attempt belongs to: ``first try``, ``tier 2 (after 5m)``, or a person's ``resend``.

    ``ladder_no``: the attempt's place among its delivery's ladder attempts (resends, recovers
    and probes, outside the ladder, do not move a delivery along it)."""
    if trigger != "ladder":
        return {"resend": "manual resend", "recover": "recover / replay",
                "probe": "probe (endpoint offline)"}.get(trigger, trigger)
    if ladder_no <= 1:
        return "first try"
    tier = ladder_no - 1
    if tier > len(ladder.delays_ms):
        return f"tier {tier}"
    return f"tier {tier} (after {name_ms(ladder.delays_ms[tier - 1])})"


def next_attempt_holds(attempt_no: int, due: datetime | None, delivery_attempts: int, delivery_status: str) -> bool:
    """Whether an attempt's "next attempt due" still stands: it is the delivery's latest attempt
    and the delivery is still waiting for the next one (a delivered one waits for nothing)."""
    return due is not None and attempt_no == delivery_attempts and delivery_status in LADDER_STATUSES


def requester_label(kind: str, name: str, key_name: str | None = None) -> str:
    """Who asked for a resend or recover, for people: an API key (with its name), a staff member, the CLI."""
    if kind == "api_key":
        return f"tenant API key “{key_name}” ({name})" if key_name else f"tenant API key {name}"
    if kind == "cli":
        return f"command line ({name})"
    if kind == "portal":
        return actor_label(name)
    return f"{name} (staff)"


#: What each error class of an attempt means, for people.
ERROR_CLASSES = {
    "timeout": "timed out: no answer within the time limit",
    "connection": "could not connect (connection refused, reset or unreachable)",
    "dns": "the host name did not resolve",
    "tls": "the TLS handshake failed (certificate or protocol)",
    "blocked_address": "the address is not allowed (loopback, private or reserved)",
    "protocol": "the answer was not valid HTTP",
    "auth": "the destination refused the credentials in its URL",
    "refused": "the destination refused the delivery (e.g. the key is not a stream)",
    "nack": "the broker refused the message (basic.nack)",
    "unroutable": "the exchange routed the message to no queue",
    "smtp_deferred": "the mail server deferred the email (SMTP 4xx): it is tried again",
    "smtp_rejected": "the mail server rejected the email for good (SMTP 5xx): not tried again",
    "config": "the service is not set up for this kind of destination (e.g. no SMTP_URL)",
    "internal": "an unexpected error in this service (a bug): the worker's log has the details",
}


def _status_meaning(status: int) -> str:
    if status == GONE:
        return "the receiver says the endpoint is gone, so it was disabled"
    if status == TOO_MANY_REQUESTS:
        return "the receiver asked us to slow down"
    if is_redirect(status):
        return "a redirect, which is not followed"
    if 400 <= status < 500:
        return "the receiver refused the request"
    if is_server_error(status):
        return "an error at the receiver"
    return "not a success"


def cause_label(error_class: str | None, response_status: int | None) -> str:
    """What went wrong, in words: ``HTTP 500 Internal Server Error: an error at the receiver``,
    ``timed out: no answer within the time limit``."""
    if error_class in (None, "http_status", "redirect") and response_status is not None:
        try:
            phrase = f" {HTTPStatus(response_status).phrase}"
        except ValueError:
            phrase = ""
        return f"HTTP {response_status}{phrase}: {_status_meaning(response_status)}"
    return ERROR_CLASSES.get(error_class or "", f"failed ({(error_class or 'unknown reason').replace('_', ' ')})")


def cause_detail(error: str | None, response_status: int | None) -> str | None:
    """The stored error text where it says more than the cause's label (``HTTP 500`` says nothing more)."""
    if not error or (response_status is not None and error.strip() == f"HTTP {response_status}"):
        return None
    return error


def actor_label(actor: str) -> str:
    """Who did something, for people: ``root on the command line``, ``portal session 1a2b… of tenant
    ten_…``, or the staff member's email."""
    kind, _, name = actor.partition(":")
    if kind == "portal" and ":" in name:
        tenant, _, session = name.partition(":")
        return f"portal session {session} of tenant {tenant}"
    return f"{name} on the command line" if kind == "cli" and name else actor


def parse_when(text: str, now: datetime) -> datetime:
    """A point in time from ``24h`` / ``30m`` (that long ago) or an ISO 8601 date and time (UTC if no offset)."""
    text = text.strip()
    try:
        return now - timedelta(seconds=parse_seconds(text))
    except ValueError:
        pass
    try:
        return to_naive_utc(datetime.fromisoformat(text))
    except ValueError:
        raise ValueError(f"{text!r} is not a time: use e.g. 24h, 30m or 2026-11-22 10:00") from None
