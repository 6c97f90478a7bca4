"""Alert emails against a real local SMTP server (aiosmtpd): who gets them, what they say, exactly once."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta
from email.message import EmailMessage
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote

import pytest

from tests.smtp_server import PASSWORD, SmtpServer
from webhooks.health.alert_emails import Digest, digest_for, recipient, render, send_pending
from webhooks.storage.ids import new_id
from webhooks.health.mailer import MailError, SmtpConfig, send
from webhooks.storage.models import Alert, Delivery, Endpoint, Event, Tenant
from webhooks.storage.timeutil import isoformat, utcnow

PUBLIC_URL = "https://hooks.example.com"
OFFLINE_REASON = "5 consecutive failures: HTTP 500"


@pytest.fixture
def endpoint(tenant: SimpleNamespace) -> Endpoint:
    """An endpoint of ``tenant`` with its own contact address."""
    return make_endpoint(tenant, contact="ops@customer.example")


def make_endpoint(
    tenant: SimpleNamespace, contact: str | None = None, url: str = "https://customer.example/hooks"
) -> Endpoint:
    return Endpoint.create(id=new_id("ep"), tenant=tenant.id, url=url, secret="whsec_dGVzdA==", contact_email=contact)


def make_alert(endpoint: Endpoint, kind: str = "endpoint.offline", **data: Any) -> Alert:
    base = {"endpoint_id": endpoint.id, "url": endpoint.url, "reason": OFFLINE_REASON, "health": "offline"}
    return Alert.create(tenant=endpoint.tenant_id, endpoint=endpoint.id, kind=kind, data={**base, **data})


def make_deliveries(
    endpoint: Endpoint, status: str, count: int, error: str | None = None, age: timedelta = timedelta(0)
) -> None:
    for _ in range(count):
        seq = Event.select().count() + 1
        event = Event.create(id=new_id("evt"), tenant=endpoint.tenant_id, seq=seq, event_type="order.paid", payload={})
        when = utcnow() - age
        Delivery.create(id=new_id("dlv"), tenant=endpoint.tenant_id, event=event, endpoint=endpoint, status=status,
                        last_error=error, created_at=when, updated_at=when)


def reload(alert: Alert) -> Alert:
    return Alert.get_by_id(alert.id)


def status_of(alert: Alert) -> str:
    """The row's ``email_status`` now ("" while untouched)."""
    return reload(alert).email_status or ""


def parts(message: EmailMessage) -> tuple[str, str]:
    """The plain text and HTML bodies."""
    text = message.get_body(("plain",))
    html = message.get_body(("html",))
    assert text is not None and html is not None
    return text.get_content(), html.get_content()


# --- exactly once ------------------------------------------------------------------------------


def test_each_alert_is_emailed_once_even_when_send_pending_runs_twice(endpoint: Endpoint, smtp: SmtpServer) -> None:
    alerts = [make_alert(endpoint), make_alert(endpoint, "endpoint.online", health="recovering")]

    assert send_pending(smtp.url(), PUBLIC_URL) == 2
    assert send_pending(smtp.url(), PUBLIC_URL) == 0

    assert len(smtp.inbox.messages) == 2
    assert smtp.inbox.logins  # the credentials of the URL were used
    for alert in map(reload, alerts):
        assert alert.emailed_at is not None
        assert alert.email_status == "sent to ops@customer.example"


def test_two_concurrent_passes_send_each_alert_exactly_once(endpoint: Endpoint, smtp: SmtpServer) -> None:
    alerts = [make_alert(endpoint, reason=f"failure {n}") for n in range(6)]
    smtp.inbox.delay = 0.1  # keep each send in flight long enough for the passes to overlap
    start = threading.Barrier(2)
    sent: list[int] = []

    def one_pass() -> None:
        start.wait()
        sent.append(send_pending(smtp.url(), PUBLIC_URL))

    threads = [threading.Thread(target=one_pass) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    ids = sorted(message["Message-ID"] for _, message in smtp.inbox.messages)
    assert len(ids) == len(set(ids)) == len(alerts)
    assert sum(sent) == len(alerts)
    assert all(reload(alert).email_status == "sent to ops@customer.example" for alert in alerts)


def test_a_live_sending_claim_is_left_alone_and_a_stale_one_is_taken_over(endpoint: Endpoint, smtp: SmtpServer) -> None:
    live = make_alert(endpoint, reason="claimed just now")
    stale = make_alert(endpoint, reason="claimed by a sender that died")
    Alert.update(email_status=f"sending since {isoformat(utcnow())} (live)").where(Alert.id == live.id).execute()
    long_ago = isoformat(utcnow() - timedelta(minutes=11))
    Alert.update(email_status=f"sending since {long_ago} (dead)").where(Alert.id == stale.id).execute()

    assert send_pending(smtp.url(), PUBLIC_URL) == 1

    assert reload(live).emailed_at is None
    assert reload(stale).email_status == "sent to ops@customer.example"
    assert "claimed by a sender that died" in parts(smtp.inbox.messages[0][1])[0]


# --- who gets it -------------------------------------------------------------------------------


def test_recipient_is_the_endpoint_contact_first(tenant: SimpleNamespace, endpoint: Endpoint) -> None:
    Tenant.update(contact_email="billing@customer.example").where(Tenant.id == tenant.id).execute()
    assert recipient(make_alert(endpoint)) == "ops@customer.example"


def test_recipient_falls_back_to_the_tenant_contact(tenant: SimpleNamespace, smtp: SmtpServer) -> None:
    Tenant.update(contact_email="billing@customer.example").where(Tenant.id == tenant.id).execute()
    alert = make_alert(make_endpoint(tenant, contact=None))

    assert recipient(alert) == "billing@customer.example"
    assert send_pending(smtp.url(), PUBLIC_URL) == 1
    assert len(smtp.sent_to("billing@customer.example")) == 1


def test_alert_without_any_contact_address_is_marked_and_not_sent(tenant: SimpleNamespace, smtp: SmtpServer) -> None:
    alert = make_alert(make_endpoint(tenant, contact="  "))

    assert recipient(alert) is None
    assert send_pending(smtp.url(), PUBLIC_URL) == 0

    row = reload(alert)
    assert (row.email_status, row.emailed_at is not None) == ("no contact address", True)
    assert smtp.inbox.messages == []


@pytest.mark.parametrize("contact", [
    "ops@customer.example\r\nBcc: attacker@evil.example",  # header injection
    "Ops <ops@customer.example>",
    "ops@exämple.example",  # would need SMTPUTF8
])
def test_malformed_contact_address_is_marked_not_used(tenant: SimpleNamespace, smtp: SmtpServer, contact: str) -> None:
    alert = make_alert(make_endpoint(tenant, contact=contact))

    assert send_pending(smtp.url(), PUBLIC_URL) == 0

    assert reload(alert).email_status == "not sent: invalid contact address"
    assert smtp.inbox.messages == []


# --- what it says ------------------------------------------------------------------------------


def test_offline_email_names_url_reason_digest_and_console_link(endpoint: Endpoint, smtp: SmtpServer) -> None:
    make_deliveries(endpoint, "parked", 3, "HTTP 500: boom", age=timedelta(hours=2, minutes=5))
    make_deliveries(endpoint, "retrying", 2, "timeout after 15s")
    make_deliveries(endpoint, "failed", 1, "HTTP 500: boom")
    make_deliveries(endpoint, "delivered", 4)
    alert = make_alert(endpoint)

    assert send_pending(smtp.url(), PUBLIC_URL) == 1

    (recipients, message), = smtp.inbox.messages
    assert recipients == ["ops@customer.example"]
    assert message["Subject"] == "[webhooks] Endpoint https://customer.example/hooks is offline"
    assert message["From"] == "alerts@example.com"
    assert message["To"] == "ops@customer.example"
    assert message["Message-ID"].startswith(f"<alert-{alert.id}-")
    console = f"{PUBLIC_URL}/console/endpoints/{endpoint.id}"
    for body in parts(message):
        assert "https://customer.example/hooks" in body
        assert OFFLINE_REASON in body
        assert console in body
        assert "2 h 5 min" in body  # the oldest parked delivery's age
        assert "HTTP 500: boom" in body and "timeout after 15s" in body
    text, html = parts(message)
    assert "parked:   3" in text and "retrying: 2" in text and "failed:   1" in text
    assert "parked: <strong>3</strong>" in html and "retrying: <strong>2</strong>" in html
    assert f'<a href="{console}">' in html


def test_exhausted_email_names_event_attempts_last_error_and_links_to_the_event(
    endpoint: Endpoint, smtp: SmtpServer
) -> None:
    make_alert(endpoint, "delivery.exhausted", delivery_id="dlv_1", event_id="evt_1", event_type="order.paid",
               attempts=10, last_error="connection refused", health="online")

    send_pending(smtp.url(), PUBLIC_URL)

    message = smtp.inbox.messages[0][1]
    assert message["Subject"] == (
        "[webhooks] Delivery of order.paid to https://customer.example/hooks failed after 10 attempts"
    )
    text, html = parts(message)
    for body in (text, html):
        assert "evt_1" in body and "connection refused" in body and "10 attempts" in body
        assert f"{PUBLIC_URL}/console/events/evt_1" in body
        assert f"{PUBLIC_URL}/console/endpoints/{endpoint.id}" in body


@pytest.mark.parametrize("kind, words", [
    ("endpoint.offline", "is offline"),
    ("endpoint.online", "is back online"),
    ("endpoint.disabled", "is disabled"),
    ("delivery.exhausted", "failed after"),
])
def test_every_alert_kind_renders_a_text_and_an_html_part(endpoint: Endpoint, kind: str, words: str) -> None:
    message = render(make_alert(endpoint, kind), Digest(), PUBLIC_URL)

    assert message["Subject"].startswith("[webhooks] ") and words in message["Subject"]
    text, html = parts(message)
    assert "(unknown)" not in text or kind == "delivery.exhausted"  # exhausted data is missing here
    assert html.lstrip().startswith("<!DOCTYPE html>")


def test_customer_controlled_strings_are_escaped_in_the_html_part(tenant: SimpleNamespace, smtp: SmtpServer) -> None:
    url = "https://customer.example/hooks?a=1&b=<script>alert(1)</script>"
    endpoint = make_endpoint(tenant, contact="ops@customer.example", url=url)
    error = 'HTTP 500: <img src=x onerror="alert(2)">'
    make_deliveries(endpoint, "retrying", 1, error)
    make_alert(endpoint, "delivery.exhausted", delivery_id="dlv_1", event_id="evt_1", event_type="order.paid",
               attempts=3, last_error=error)

    send_pending(smtp.url(), PUBLIC_URL)

    text, html = parts(smtp.inbox.messages[0][1])
    assert url in text and error in text  # plain text stays verbatim
    assert "<script>" not in html and "<img" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "a=1&amp;b=" in html
    assert "&lt;img src=x onerror=&#34;alert(2)&#34;&gt;" in html


def test_missing_data_keys_render_as_unknown_and_an_unknown_kind_is_marked_unrenderable(
    endpoint: Endpoint, smtp: SmtpServer
) -> None:
    sparse = Alert.create(tenant=endpoint.tenant_id, endpoint=endpoint.id, kind="endpoint.disabled", data={})
    odd = Alert.create(tenant=endpoint.tenant_id, endpoint=endpoint.id, kind="endpoint.exploded", data={})

    assert "(unknown)" in render(sparse, Digest(), PUBLIC_URL)["Subject"]
    with pytest.raises(ValueError, match="unknown alert kind"):
        render(odd, Digest(), PUBLIC_URL)
    assert send_pending(smtp.url(), PUBLIC_URL) == 1

    assert status_of(odd).startswith("not sent: cannot render")
    assert reload(odd).emailed_at is not None


def test_digest_counts_waiting_deliveries_and_keeps_the_ten_most_recent_causes(
    endpoint: Endpoint, tenant: SimpleNamespace
) -> None:
    for n in range(12):
        make_deliveries(endpoint, "retrying", 1, f"cause {n}", age=timedelta(minutes=60 - n))
    make_deliveries(endpoint, "parked", 2, "cause 11", age=timedelta(days=1, hours=3))
    make_deliveries(make_endpoint(tenant), "parked", 5, "another endpoint")

    digest = digest_for(endpoint.id)

    assert (digest.parked, digest.retrying, digest.failed) == (2, 12, 0)
    assert digest.oldest_parked_age is not None and digest.oldest_parked_age >= timedelta(days=1, hours=3)
    assert [cause.error for cause in digest.causes] == [f"cause {n}" for n in range(11, 1, -1)]
    assert digest.causes[0].count == 3
    assert digest_for(make_endpoint(tenant).id) == Digest()


# --- when SMTP is missing or failing -----------------------------------------------------------


def test_smtp_down_leaves_alerts_unsent_and_the_next_pass_sends_them(endpoint: Endpoint, smtp: SmtpServer) -> None:
    first, second = make_alert(endpoint, reason="first"), make_alert(endpoint, reason="second")
    smtp.stop()

    assert send_pending(smtp.url(), PUBLIC_URL) == 0

    assert reload(first).emailed_at is None and status_of(first).startswith("will retry: ")
    assert reload(second).email_status is None  # the pass stopped at the first failure
    smtp.start()
    assert send_pending(smtp.url(), PUBLIC_URL) == 2
    assert send_pending(smtp.url(), PUBLIC_URL) == 0
    assert len(smtp.inbox.messages) == 2


def test_alert_older_than_a_day_is_given_up_when_smtp_fails(endpoint: Endpoint, smtp: SmtpServer) -> None:
    old = make_alert(endpoint)
    Alert.update(created_at=utcnow() - timedelta(hours=25)).where(Alert.id == old.id).execute()
    smtp.stop()

    send_pending(smtp.url(), PUBLIC_URL)

    assert reload(old).emailed_at is not None and status_of(old).startswith("gave up after 24 h: ")


def test_refused_recipient_is_marked_and_does_not_hold_up_later_alerts(
    tenant: SimpleNamespace, smtp: SmtpServer
) -> None:
    smtp.inbox.refused.add("gone@customer.example")
    refused = make_alert(make_endpoint(tenant, contact="gone@customer.example"))
    later = make_alert(make_endpoint(tenant, contact="ops@customer.example"))

    assert send_pending(smtp.url(), PUBLIC_URL) == 1

    assert status_of(refused).startswith("not sent: SMTPRecipientsRefused")
    assert reload(refused).emailed_at is not None
    assert reload(later).email_status == "sent to ops@customer.example"


def test_without_smtp_url_alerts_are_marked_and_skipped(endpoint: Endpoint, smtp: SmtpServer) -> None:
    alerts = [make_alert(endpoint), make_alert(endpoint)]

    assert send_pending(None, PUBLIC_URL) == 0

    for alert in map(reload, alerts):
        assert (alert.email_status, alert.emailed_at is not None) == ("smtp not configured", True)
    assert send_pending(smtp.url(), PUBLIC_URL) == 0  # marked rows are not sent later either
    assert smtp.inbox.messages == []


def test_smtp_password_never_appears_in_email_status_or_logs(
    endpoint: Endpoint, smtp: SmtpServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    alert = make_alert(endpoint)

    send_pending(smtp.url(password=PASSWORD + "-wrong"), PUBLIC_URL)  # the server echoes it back

    status = status_of(alert)
    assert status.startswith("will retry: SMTPAuthenticationError") and "***" in status
    send_pending(smtp.url(), PUBLIC_URL)
    assert reload(alert).email_status == "sent to ops@customer.example"
    # Every log line but the test SMTP server's own (``mail.log``, which logs what it answers).
    logged = "\n".join(
        f"{record.getMessage()} {record.exc_text or ''}" for record in caplog.records if record.name != "mail.log"
    )
    assert "alert email failed, will retry" in logged
    for secret in (PASSWORD, quote(PASSWORD, safe="")):
        assert secret not in status
        assert secret not in logged


# --- mailer ------------------------------------------------------------------------------------


def test_send_refuses_to_fall_back_to_plain_text_when_starttls_is_unavailable(smtp: SmtpServer) -> None:
    config = SmtpConfig.parse(f"smtp://127.0.0.1:{smtp.port}?starttls=1")
    with pytest.raises(MailError, match="STARTTLS"):
        send(config, EmailMessage())
    assert smtp.inbox.messages == []


MAIL = "mail.example.com"
DEFAULT_FROM = "webhooks@mail.example.com"


@pytest.mark.parametrize("url, expected", [
    ("smtp://mail.example.com", SmtpConfig(MAIL, 25, "plain", sender=DEFAULT_FROM)),
    ("smtp://u:p@mail.example.com:2525", SmtpConfig(MAIL, 2525, "plain", "u", "p", DEFAULT_FROM)),
    ("smtps://u:p@mail.example.com", SmtpConfig(MAIL, 465, "tls", "u", "p", DEFAULT_FROM)),
    ("smtp://mail.example.com?starttls=1", SmtpConfig(MAIL, 587, "starttls", sender=DEFAULT_FROM)),
    ("smtp://mail.example.com:25?starttls=true", SmtpConfig(MAIL, 25, "starttls", sender=DEFAULT_FROM)),
    ("smtp://us%40er:p%3Aw%40d@h?from=Ops%20%3Cops%40x.io%3E",
     SmtpConfig("h", 25, "plain", "us@er", "p:w@d", "Ops <ops@x.io>")),
    ("smtp://127.0.0.1:1025", SmtpConfig("127.0.0.1", 1025, "plain", sender="webhooks@[127.0.0.1]")),
    ("smtp://[::1]:1025", SmtpConfig("::1", 1025, "plain", sender="webhooks@[::1]")),
])
def test_smtp_url_parses_into_config(url: str, expected: SmtpConfig) -> None:
    assert SmtpConfig.parse(url) == expected


@pytest.mark.parametrize("url, problem", [
    ("http://mail.example.com", "scheme must be smtp or smtps"),
    ("mail.example.com:25", "scheme must be smtp or smtps"),
    ("smtp://", "host is missing"),
    ("smtp://h:99999", "port"),
    ("smtp://h:0", "port"),
    ("smtp://[::1", "not a URL"),
    ("smtp://h/inbox", "path is not allowed"),
    ("smtp://h?tls=1", "unknown query parameter(s) tls"),
    ("smtp://h?starttls=maybe", "not a boolean"),
    ("smtps://h?starttls=1", "contradicts smtps"),
    ("smtp://user@h", "both a user name and a password"),
    ("smtp://:pw@h", "both a user name and a password"),
    ("smtp://h?from=nobody", "not an email address"),
])
def test_invalid_smtp_url_names_the_problem(url: str, problem: str) -> None:
    with pytest.raises(ValueError, match="SMTP_URL: ") as error:
        SmtpConfig.parse(url)
    assert problem in str(error.value)


@pytest.mark.parametrize("url", [
    "smtp://u:topsecret@h:notaport", "ftp://u:topsecret@h", "smtp://u:topsecret@h/x", "smtp://u:topsecret@[h",
])
def test_invalid_smtp_url_error_does_not_echo_the_password(url: str) -> None:
    with pytest.raises(ValueError) as error:
        SmtpConfig.parse(url)
    assert "topsecret" not in str(error.value)


def test_smtp_config_hides_the_password_in_repr_str_and_redact() -> None:
    config = SmtpConfig.parse("smtps://u:p%40ss@mail.example.com")
    assert config.password == "p@ss"
    assert "p@ss" not in repr(config) and "p@ss" not in str(config)
    assert str(config) == "smtps://u@mail.example.com:465"
    assert config.redact("535 bad p@ss (p%40ss)") == "535 bad *** (***)"
