"""Email destinations: ``mailto:`` endpoints get each event as one email through ``SMTP_URL``.

Against a real SMTP server on 127.0.0.1 (aiosmtpd, ``tests/smtp_server.py``), which can defer
or refuse what it is sent, and be stopped and started again on its port.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from typing import Any

import pytest
from hypothesis import given, strategies as st
from standardwebhooks import Webhook

from tests.api_helpers import create_endpoint, send
from tests.conftest import wait_until
from tests.delivery.destination_helpers import SECRET, parcel
from tests.smtp_server import PASSWORD, SmtpServer
from webhooks.catalog.mail_templates import MailTemplates, render
from webhooks.delivery.classify import classify
from webhooks.delivery.decide import after_attempt
from webhooks.delivery.destinations import Parcel, check_target
from webhooks.delivery.destinations.mail_message import compose, event_values
from webhooks.delivery.destinations import mailto
from webhooks.delivery.destinations.mailto import PATTERN, CatalogTemplates, Email, MailTarget
from webhooks.delivery.http_result import HttpResult
from webhooks.delivery.netguard import TargetPolicy
from webhooks.delivery.outgoing import build_request
from webhooks.messaging.ladder import Ladder
from webhooks.messaging.messages import DeliveryMessage
from webhooks.messaging.topology import Topology
from webhooks.storage.models import Attempt, Delivery
from webhooks.storage.statuses import DeliveryStatus
from webhooks.storage.timeutil import utcnow

TO = "ops@example.com"


def verified(message: EmailMessage, secret: str) -> Any:
    """The email's attached body checked with its ``Webhook-*`` headers, with the official library."""
    (attachment,) = list(message.iter_attachments())
    headers = {name: str(message[name]) for name in ("webhook-id", "webhook-timestamp", "webhook-signature")}
    return Webhook(secret).verify(attachment.get_content(), headers)


def parts(message: EmailMessage) -> tuple[str, str, str]:
    """Subject, text and HTML of an email (lines end in CRLF on the wire: read here as ``\n``)."""
    text, html = message.get_body(("plain",)), message.get_body(("html",))
    assert text is not None and html is not None
    return (str(message["subject"]), text.get_content().replace("\r\n", "\n"),
            html.get_content().replace("\r\n", "\n"))


def deliver(smtp_url: str | None, url: str, *, templates: dict[str, MailTemplates] | None = None) -> HttpResult:
    """The result of emailing ``parcel()`` to ``url`` through one new email destination."""
    async def run() -> HttpResult:
        email = Email(timeout=5, smtp_url=smtp_url, templates=CatalogTemplates(60, read=lambda: templates or {}))
        try:
            return await email.deliver(url, parcel())
        finally:
            await email.close()

    return asyncio.run(run())


# -- the URL ---------------------------------------------------------------------------------------


def test_a_mailto_url_names_one_address_or_several() -> None:
    assert MailTarget.parse("mailto:ops@example.com").addresses == ("ops@example.com",)
    assert MailTarget.parse("MAILTO:a.b+hooks@mail.example.co,oncall@example.org").addresses == (
        "a.b+hooks@mail.example.co", "oncall@example.org")
    assert MailTarget.parse("mailto:ops@example.com,b@example.com,OPS@example.com").addresses == (
        "ops@example.com", "b@example.com")  # each once


@pytest.mark.parametrize(("url", "problem"), [
    ("mailto:", "names at least one address"),
    ("mailto:ops@", "'ops@' is not an email address"),
    ("mailto:ops@example.com,bob", "'bob' is not an email address"),
    ("mailto:ops@localhost", "'ops@localhost' is not an email address"),
    ("mailto:ops@[127.0.0.1]", "is not an email address"),
    ("mailto:o ps@example.com", "'o ps@example.com' is not an email address"),
    ("mailto:ops%40example.com", "is not an email address"),
    ("mailto:ops@example.com?subject=hi", "takes no ?subject="),
    ("mailto:" + ",".join(f"a{n}@example.com" for n in range(11)), "at most 10 addresses"),
])
def test_a_bad_mailto_url_is_refused_naming_the_address(url: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem.replace("?", r"\?").replace("[", r"\[")):
        MailTarget.parse(url)


@given(st.from_regex(PATTERN))
def test_every_url_the_documented_pattern_allows_is_read(url: str) -> None:
    MailTarget.parse(url)


def test_no_host_of_a_mailto_url_is_checked_or_connected_to() -> None:
    check_target("mailto:ops@corp.internal", TargetPolicy())  # the production policy: nothing is resolved


def test_the_api_takes_a_mailto_url_and_refuses_a_bad_address_with_a_422_naming_it(
        make_app: Callable[..., Any], tenant: Any, auth: Any, smtp: SmtpServer) -> None:
    client = make_app(smtp_url=smtp.url()).test_client()

    created = create_endpoint(client, auth(tenant), "mailto:ops@example.com,oncall@example.com")
    refused = client.post("/v1/endpoints", json={"url": "mailto:ops@example.com,ops@"}, headers=auth(tenant))
    changed = client.patch(f"/v1/endpoints/{created['id']}", json={"url": "mailto:bad address@example.com"},
                           headers=auth(tenant))

    assert created["url"] == "mailto:ops@example.com,oncall@example.com"
    assert refused.status_code == 422
    assert refused.json["errors"]["json"]["url"][0].startswith("'ops@' is not an email address")
    assert changed.status_code == 422 and "'bad address@example.com'" in changed.json["errors"]["json"]["url"][0]


def test_without_smtp_url_a_mailto_endpoint_is_a_422(client: Any, tenant: Any, auth: Any) -> None:
    refused = client.post("/v1/endpoints", json={"url": "mailto:ops@example.com"}, headers=auth(tenant))

    assert refused.status_code == 422
    assert refused.json["errors"]["json"]["url"] == [
        "this service sends no email (its operator has not set SMTP_URL): use another kind of destination"]


# -- one destination -------------------------------------------------------------------------------


def test_an_email_carries_the_rendered_templates_and_a_body_that_verifies(smtp: SmtpServer) -> None:
    templates = {"order.paid": MailTemplates("Paid: {{ payload.n }}", "n is {{ payload.n }}", "<b>{{ payload.n }}</b>")}

    result = deliver(smtp.url(), f"mailto:{TO},second@example.com", templates=templates)

    (message,) = smtp.sent_to(TO)
    assert smtp.sent_to("second@example.com") == [message]  # one email to both
    assert result.ok and result.status_code is None and result.body == b"250 Message accepted for delivery"
    assert parts(message) == ("Paid: 1", "n is 1\n", "<b>1</b>\n")
    assert verified(message, SECRET) == {"type": "order.paid", "timestamp": "2026-11-26T00:00:00Z", "data": {"n": 1}}
    assert message["from"] == "alerts@example.com" and message["webhook-id"] == "evt_1"
    assert smtp.inbox.logins == ["alerts"]


def test_a_signature_with_two_keys_survives_the_folding_of_its_long_header() -> None:
    other = "whsec_" + "WlpaWlpaWlpaWlpaWlpaWlpaWlpaWlpa"
    request = build_request("evt_1", "order.paid", "2026-11-26T00:00:00Z", {"n": "Zoë"}, [SECRET, other], int(time.time()))
    signed = Parcel("evt_1", "order.paid", request)
    mail = compose(signed, render(None, event_values(signed)), "webhooks@example.com", (TO,))

    message = BytesParser(policy=policy.default).parsebytes(mail.as_bytes())

    assert max(len(line) for line in mail.as_bytes().splitlines()) <= 78  # folded, and 7-bit
    assert all(byte < 128 for byte in mail.as_bytes())
    assert verified(message, SECRET)["data"] == {"n": "Zoë"} and verified(message, other)["data"] == {"n": "Zoë"}


def test_a_4xx_reply_is_deferred_and_a_5xx_reply_is_rejected_with_the_reply_as_response(smtp: SmtpServer) -> None:
    smtp.inbox.data_replies = ["451 4.3.0 try again later"]
    deferred = deliver(smtp.url(), f"mailto:{TO}")
    smtp.inbox.refused = {TO}
    rejected = deliver(smtp.url(), f"mailto:{TO}")

    assert deferred.error_class == "smtp_deferred" and deferred.body == b"451 4.3.0 try again later"
    assert "refused the message: 451 4.3.0 try again later" in (deferred.error or "")
    assert rejected.error_class == "smtp_rejected"
    assert rejected.body == f"RCPT TO <{TO}>: 550 5.1.1 mailbox unavailable".encode()
    assert smtp.inbox.messages == []


def test_addresses_refused_for_good_are_named_and_the_rest_get_the_email(smtp: SmtpServer) -> None:
    smtp.inbox.refused = {"gone@example.com"}

    result = deliver(smtp.url(), f"mailto:gone@example.com,{TO}")

    assert result.ok
    assert result.body == b"250 Message accepted for delivery; refused: gone@example.com (550 5.1.1 mailbox unavailable)"
    assert len(smtp.sent_to(TO)) == 1


def test_an_address_refused_for_now_holds_the_email_back_from_every_address(smtp: SmtpServer) -> None:
    smtp.inbox.deferred = {"busy@example.com"}

    result = deliver(smtp.url(), f"mailto:{TO},busy@example.com")

    assert result.error_class == "smtp_deferred" and b"450 4.2.1" in result.body
    assert smtp.inbox.messages == []  # sent to nobody, so nobody gets it twice


def test_a_worker_holds_at_most_max_sessions_smtp_sessions_at_once(
        smtp: SmtpServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mailto, "MAX_SESSIONS", 2)
    smtp.inbox.delay = 0.2  # each message takes a while: the deliveries overlap

    async def run() -> list[HttpResult]:
        email = Email(timeout=10, smtp_url=smtp.url(), templates=CatalogTemplates(60, read=dict))
        return await asyncio.gather(*[email.deliver(f"mailto:{TO}", parcel(f"evt_{n}")) for n in range(6)])

    results = asyncio.run(run())

    assert all(result.ok for result in results) and len(smtp.sent_to(TO)) == 6
    assert smtp.inbox.most_receiving <= 2  # six were under way at once


def test_a_wrong_smtp_password_is_an_auth_failure_that_does_not_show_the_password(smtp: SmtpServer) -> None:
    result = deliver(smtp.url(password="not-" + PASSWORD), f"mailto:{TO}")

    assert result.error_class == "auth" and "535" in (result.error or "")
    assert PASSWORD not in (result.error or "") + result.body.decode()
    assert "not-" + PASSWORD not in (result.error or "") + result.body.decode()


def test_a_mail_server_that_does_not_answer_is_a_connection_failure() -> None:
    down = SmtpServer()  # never started

    result = deliver(down.url(), f"mailto:{TO}")

    assert result.error_class == "connection" and f"127.0.0.1:{down.port}" in (result.error or "")


def test_without_smtp_url_an_email_fails_naming_the_setting() -> None:
    result = deliver(None, f"mailto:{TO}")

    assert result.error_class == "config" and "SMTP_URL" in (result.error or "")


def test_an_smtp_rejection_fails_the_delivery_at_once_and_a_deferral_climbs_the_ladder() -> None:
    message = DeliveryMessage("dlv_1", "evt_1", "ep_1", "ten_1", "order.paid", "2026-11-26T00:00:00Z", {}, attempt=1)
    ladder = Ladder.parse("1s,1s")
    topology = Topology("t", ladder)

    def step(error_class: str) -> Any:
        return after_attempt(message, classify(None, {}, error_class, "x"), DeliveryStatus.PENDING, 0, None,
                             ladder, topology, utcnow())

    assert (step("smtp_rejected").status, step("smtp_rejected").exhausted) == (DeliveryStatus.FAILED, True)
    assert step("smtp_deferred").status == DeliveryStatus.RETRYING


# -- through the service ---------------------------------------------------------------------------


def test_an_event_reaches_the_inbox_rendered_from_its_type_and_verifies(
        make_app: Callable[..., Any], make_settings: Callable[..., Any], tenant: Any, auth: Any, platform: Any,
        start_worker: Any, smtp: SmtpServer) -> None:
    settings = make_settings(smtp_url=smtp.url())
    client = make_app(smtp_url=smtp.url()).test_client()
    typed = client.post("/v1/event-types", headers=platform, json={
        "name": "order.paid", "examples": [{"order": 1, "customer": "Ann"}],
        "email_subject": "Order {{ payload.order }} paid",
        "email_text": "{{ payload.customer }} paid order {{ payload.order }} ({{ id }}).",
        "email_html": "<p>{{ payload.customer }} paid <b>{{ payload.order }}</b></p>"})
    assert typed.status_code == 201, typed.json
    endpoint = create_endpoint(client, auth(tenant), f"mailto:{TO}")
    start_worker(settings)

    event = send(client, auth(tenant), "order.paid", {"order": 42, "customer": "<Bob>"})

    delivery = wait_until(lambda: Delivery.get_or_none(Delivery.event == event["id"], Delivery.status == "delivered"))
    (message,) = smtp.sent_to(TO)
    assert parts(message) == ("Order 42 paid", f"<Bob> paid order 42 ({event['id']}).\n",
                              "<p>&lt;Bob&gt; paid <b>42</b></p>\n")
    assert verified(message, endpoint["secret"]) == {"type": "order.paid", "timestamp": event["created_at"],
                                                     "data": {"order": 42, "customer": "<Bob>"}}
    (attempt,) = Attempt.select().where(Attempt.delivery == delivery.id)
    assert attempt.response_body == "250 Message accepted for delivery" and attempt.error_class is None


def test_an_event_of_a_type_without_templates_gets_the_default_rendering(
        make_app: Callable[..., Any], make_settings: Callable[..., Any], tenant: Any, auth: Any, start_worker: Any,
        smtp: SmtpServer) -> None:
    client = make_app(smtp_url=smtp.url()).test_client()
    endpoint = create_endpoint(client, auth(tenant), f"mailto:{TO}")
    start_worker(make_settings(smtp_url=smtp.url()))

    event = send(client, auth(tenant), "order.created", {"order": 7, "name": "Zoë"})

    (message,) = wait_until(lambda: smtp.sent_to(TO))
    subject, text, html = parts(message)
    assert subject == f"[order.created] {event['id']}"
    assert text.startswith(f"Event {event['id']} of type order.created") and '"name": "Zoë"' in text
    assert "<pre>{\n  &quot;order&quot;: 7,\n  &quot;name&quot;: &quot;Zoë&quot;\n}</pre>" in html
    assert verified(message, endpoint["secret"])["data"] == {"order": 7, "name": "Zoë"}


def test_an_smtp_451_climbs_the_ladder_and_the_250_after_it_delivers(
        make_app: Callable[..., Any], make_settings: Callable[..., Any], tenant: Any, auth: Any, start_worker: Any,
        smtp: SmtpServer) -> None:
    client = make_app(smtp_url=smtp.url()).test_client()
    create_endpoint(client, auth(tenant), f"mailto:{TO}")
    smtp.inbox.data_replies = ["451 4.3.0 try again later", "451 4.3.0 try again later"]
    start_worker(make_settings(smtp_url=smtp.url(), ladder="1s,1s,1s"))

    event = send(client, auth(tenant))

    delivery = wait_until(
        lambda: Delivery.get_or_none(Delivery.event == event["id"], Delivery.status == "delivered"), timeout=20)
    attempts = list(Attempt.select().where(Attempt.delivery == delivery.id).order_by(Attempt.attempt_no))
    assert [(a.outcome, a.error_class, a.response_body) for a in attempts] == [
        ("retrying", "smtp_deferred", "451 4.3.0 try again later"),
        ("retrying", "smtp_deferred", "451 4.3.0 try again later"),
        ("delivered", None, "250 Message accepted for delivery")]
    assert len(smtp.sent_to(TO)) == 1


def test_an_smtp_550_fails_the_delivery_without_a_retry(
        make_app: Callable[..., Any], make_settings: Callable[..., Any], tenant: Any, auth: Any, start_worker: Any,
        smtp: SmtpServer) -> None:
    client = make_app(smtp_url=smtp.url()).test_client()
    create_endpoint(client, auth(tenant), f"mailto:{TO}")
    smtp.inbox.refused = {TO}
    start_worker(make_settings(smtp_url=smtp.url(), ladder="1s,1s,1s"))

    event = send(client, auth(tenant))

    delivery = wait_until(lambda: Delivery.get_or_none(Delivery.event == event["id"], Delivery.status == "failed"))
    (attempt,) = Attempt.select().where(Attempt.delivery == delivery.id)
    assert (attempt.outcome, attempt.error_class) == ("failed", "smtp_rejected")
    assert attempt.response_body == f"RCPT TO <{TO}>: 550 5.1.1 mailbox unavailable"
    assert delivery.attempts == 1 and delivery.next_attempt_at is None


def test_a_mail_server_that_is_down_fails_up_the_ladder_and_gets_the_email_when_it_is_back(
        make_app: Callable[..., Any], make_settings: Callable[..., Any], tenant: Any, auth: Any,
        start_worker: Any) -> None:
    smtp = SmtpServer()  # down for now, on the port SMTP_URL names
    client = make_app(smtp_url=smtp.url()).test_client()
    create_endpoint(client, auth(tenant), f"mailto:{TO}")
    start_worker(make_settings(smtp_url=smtp.url(), ladder="1s,1s,2s,3s,5s"))
    event = send(client, auth(tenant))
    wait_until(lambda: Attempt.select().where(Attempt.event == event["id"]).count() >= 2, timeout=15)

    smtp.start()
    try:
        delivery = wait_until(
            lambda: Delivery.get_or_none(Delivery.event == event["id"], Delivery.status == "delivered"), timeout=20)
    finally:
        smtp.stop()

    attempts = list(Attempt.select().where(Attempt.delivery == delivery.id).order_by(Attempt.attempt_no))
    assert [a.error_class for a in attempts[:2]] == ["connection", "connection"]
    assert [a.outcome for a in attempts] == ["retrying"] * (len(attempts) - 1) + ["delivered"]
    assert len(smtp.sent_to(TO)) == 1
