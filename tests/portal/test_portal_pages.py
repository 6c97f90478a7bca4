"""The portal's pages: endpoints with their health, the endpoint form with the API's validation,
disable/enable/delete, the secret, test events, the event log and event pages, resend and
recover; each change in the console's audit log with the session as actor."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

from flask import Flask
from flask.testing import FlaskClient

from tests.api_helpers import create_endpoint, make_attempt, post_event
from tests.portal_helpers import portal_client, portal_post
from webhooks.console.models import AuditEntry
from webhooks.storage.models import Delivery, Endpoint, Event


def text(response) -> str:  # type: ignore[no-untyped-def]
    return response.get_data(as_text=True)


def test_the_endpoint_list_shows_each_endpoints_health_answers_and_what_waits(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace, headers: dict[str, str]
) -> None:
    endpoint = create_endpoint(client, headers, description="orders")
    delivery = post_event(client, headers).json["deliveries"][0]["id"]
    make_attempt(delivery, 1, outcome="delivered", response_status=200, duration_ms=40.0)
    make_attempt(delivery, 2, outcome="failed", duration_ms=900.0)
    Endpoint.update(health="offline").where(Endpoint.id == endpoint["id"]).execute()
    Delivery.update(status="parked").where(Delivery.id == delivery).execute()

    page = text(portal_client(app, tenant).get("/portal/"))

    assert endpoint["url"] in page and "orders" in page
    assert 'class="badge offline"' in page
    assert "50.0%" in page and "900 ms" in page
    assert "1 waiting since" in page and "to catch up" in page


def test_a_customer_adds_an_endpoint_choosing_from_the_event_types_sent_with_their_counts(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace, headers: dict[str, str]
) -> None:
    for event_type in ("order.created", "order.created", "invoice.paid"):
        post_event(client, headers, event_type)
    browser = portal_client(app, tenant)

    form = text(browser.get("/portal/endpoints/new"))
    added = portal_post(browser, "/portal/endpoints/new", {
        "url": "http://127.0.0.1:9/hook", "event_types": "invoice.paid", "other_event_types": "refund.made",
        "description": "billing", "rate_limit": "5",
    })

    assert 'value="order.created"' in form and "(2 sent)" in form and "(1 sent)" in form
    assert added.status_code == 303
    endpoint = Endpoint.get(Endpoint.description == "billing")
    assert (endpoint.tenant_id, endpoint.event_types, endpoint.rate_limit) == (tenant.id, ["invoice.paid", "refund.made"], 5)
    assert added.headers["Location"] == f"/portal/endpoints/{endpoint.id}"
    entry = AuditEntry.get(AuditEntry.action == "create")
    assert entry.actor.startswith(f"portal:{tenant.id}:") and entry.target_id == endpoint.id


def test_the_endpoint_form_says_what_is_wrong_in_the_apis_words(app: Flask, tenant: SimpleNamespace) -> None:
    browser = portal_client(app, tenant)

    page = portal_post(browser, "/portal/endpoints/new", {"url": "ftp://example.com", "rate_limit": "fast"})

    assert page.status_code == 400
    body = text(page)
    assert "There is a problem" in body and 'href="#field-url"' in body
    assert "URL: URL scheme must be http, https, amqp, amqps, redis, rediss or mailto, not &#39;ftp&#39;" in body and "Rate limit: Not a valid integer" in body
    assert Endpoint.select().count() == 0


def test_editing_an_endpoint_changes_what_it_receives(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace, headers: dict[str, str]
) -> None:
    endpoint = create_endpoint(client, headers)
    browser = portal_client(app, tenant)

    assert endpoint["url"] in text(browser.get(f"/portal/endpoints/{endpoint['id']}/edit"))
    saved = portal_post(browser, f"/portal/endpoints/{endpoint['id']}/edit",
                        {"url": endpoint["url"], "other_event_types": "order.created", "description": "new"})

    assert saved.status_code == 303
    row = Endpoint.get_by_id(endpoint["id"])
    assert (row.event_types, row.description) == (["order.created"], "new")


def test_disable_enable_and_delete_after_a_confirmation(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace, headers: dict[str, str]
) -> None:
    endpoint = create_endpoint(client, headers)
    base = f"/portal/endpoints/{endpoint['id']}"
    browser = portal_client(app, tenant)

    portal_post(browser, f"{base}/disable")
    assert Endpoint.get_by_id(endpoint["id"]).disabled
    portal_post(browser, f"{base}/enable")
    assert not Endpoint.get_by_id(endpoint["id"]).disabled
    confirm = text(browser.get(f"{base}/delete"))
    assert "Delete the endpoint" in confirm and "cannot be undone" in confirm
    assert Endpoint.get_by_id(endpoint["id"]).deleted_at is None
    portal_post(browser, f"{base}/delete")

    assert Endpoint.get_by_id(endpoint["id"]).deleted_at is not None
    assert browser.get(base).status_code == 404
    assert [e.action for e in AuditEntry.select().order_by(AuditEntry.id)] == ["disable", "enable", "delete"]


def test_revealing_and_rotating_the_secret(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace, headers: dict[str, str]
) -> None:
    endpoint = create_endpoint(client, headers)
    base = f"/portal/endpoints/{endpoint['id']}"
    browser = portal_client(app, tenant)

    assert endpoint["secret"] not in text(browser.get(base))
    revealed = browser.get(f"{base}/secret")
    rotated = portal_post(browser, f"{base}/secret/rotate")

    assert endpoint["secret"] in text(revealed) and revealed.headers["Cache-Control"] == "no-store"
    assert rotated.status_code == 303
    row = Endpoint.get_by_id(endpoint["id"])
    assert row.secret != endpoint["secret"] and row.previous_secret == endpoint["secret"]
    assert row.secret in text(browser.get(rotated.headers["Location"]))
    assert {e.action for e in AuditEntry.select()} == {"reveal_secret", "rotate_secret"}


def test_a_test_event_goes_to_that_endpoint_alone_and_its_page_waits_for_the_attempt(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace, headers: dict[str, str]
) -> None:
    first = create_endpoint(client, headers, event_types=["order.created"])
    create_endpoint(client, headers)
    browser = portal_client(app, tenant)

    sent = portal_post(browser, f"/portal/endpoints/{first['id']}/test")

    event = Event.get(Event.event_type == "webhook.test")
    assert sent.status_code == 303 and sent.headers["Location"] == f"/portal/events/{event.id}"
    assert [d.endpoint_id for d in Delivery.select().where(Delivery.event == event.id)] == [first["id"]]
    page = text(browser.get(sent.headers["Location"]))
    assert '<meta http-equiv="refresh" content="2">' in page and "No attempt yet" in page


def test_the_event_page_shows_the_payload_escaped_and_every_attempt(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace, headers: dict[str, str]
) -> None:
    create_endpoint(client, headers)
    accepted = post_event(client, headers, payload={"note": "<script>alert(1)</script>"}).json
    delivery = accepted["deliveries"][0]["id"]
    make_attempt(delivery, 1, request_headers={"webhook-signature": "v1,abc="}, response_body="<b>nope</b>",
                 error_class="http_status")

    page = text(portal_client(app, tenant).get(f"/portal/events/{accepted['id']}"))

    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page
    assert "webhook-signature: v1,abc=" in page and "&lt;b&gt;nope&lt;/b&gt;" in page
    assert "HTTP 500" in page and "12 ms" in page


def test_the_event_log_lists_events_newest_first_and_filters_them(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace, headers: dict[str, str]
) -> None:
    unheard = post_event(client, headers, "order.created").json["id"]  # before any endpoint: delivered nowhere
    first = create_endpoint(client, headers, event_types=["order.created"])["id"]
    second = create_endpoint(client, headers)["id"]
    older = post_event(client, headers, "order.created").json
    newer = post_event(client, headers, "invoice.paid").json["id"]
    failed = next(d["id"] for d in older["deliveries"] if d["endpoint_id"] == first)
    Delivery.update(status="failed").where(Delivery.id == failed).execute()
    browser = portal_client(app, tenant)

    everything = text(browser.get("/portal/events"))
    invoices = text(browser.get("/portal/events?event_type=invoice.paid"))
    failures = text(browser.get("/portal/events?status=failed"))
    to_second = text(browser.get(f"/portal/events?endpoint_id={second}"))
    bad = browser.get("/portal/events?since=yesterday-ish")

    assert everything.index(newer) < everything.index(older["id"]) < everything.index(unheard)
    assert "to no endpoint" in everything and "1 failed" in everything and "1 pending" in everything
    assert newer in invoices and older["id"] not in invoices
    assert older["id"] in failures and newer not in failures
    assert newer in to_second and older["id"] in to_second and unheard not in to_second
    assert bad.status_code == 200 and "is not a time" in text(bad)
    assert browser.get("/portal/events?before=not-a-number").status_code == 200


def test_the_event_log_pages_by_fifty(app: Flask, client: FlaskClient, tenant: SimpleNamespace, headers: dict[str, str]) -> None:
    ids = [post_event(client, headers, payload={"n": n}).json["id"] for n in range(52)]
    browser = portal_client(app, tenant)

    first = text(browser.get("/portal/events"))
    older = re.search(r'href="(/portal/events\?before=\d+)"', first)

    assert ids[-1] in first and ids[1] not in first and older
    second = text(browser.get(older.group(1).replace("&amp;", "&")))
    assert ids[1] in second and ids[0] in second and ids[-1] not in second


def test_resend_and_recover_are_audited_with_the_session_as_requester(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace, headers: dict[str, str]
) -> None:
    endpoint = create_endpoint(client, headers)
    delivery = post_event(client, headers).json["deliveries"][0]["id"]
    Delivery.update(status="failed").where(Delivery.id == delivery).execute()
    browser = portal_client(app, tenant)

    resent = portal_post(browser, f"/portal/deliveries/{delivery}/resend")
    recovered = portal_post(browser, f"/portal/endpoints/{endpoint['id']}/recover", {"since": "1h"})

    assert resent.status_code == 303 and recovered.status_code == 303
    entries = list(AuditEntry.select().order_by(AuditEntry.id))
    assert [e.action for e in entries] == ["resend", "recover"]
    assert all(e.actor.startswith(f"portal:{tenant.id}:") for e in entries)


def test_portal_changes_are_listed_in_the_consoles_audit_log(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace, headers: dict[str, str]
) -> None:
    from tests.console_helpers import log_in

    endpoint = create_endpoint(client, headers)
    portal_post(portal_client(app, tenant), f"/portal/endpoints/{endpoint['id']}/disable")
    log_in(client)

    page = text(client.get("/console/audit"))

    assert f"portal session" in page and f"of tenant {tenant.id}" in page


def test_payload_json_is_shown_indented(app: Flask, client: FlaskClient, tenant: SimpleNamespace, headers: dict[str, str]) -> None:
    event = post_event(client, headers, payload={"a": {"b": 1}}).json["id"]

    page = text(portal_client(app, tenant).get(f"/portal/events/{event}"))

    assert json.dumps({"a": {"b": 1}}, indent=2).replace('"', "&#34;") in page


def test_a_destinations_password_is_never_shown_and_saving_the_form_as_shown_keeps_it(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace, headers: dict[str, str]
) -> None:
    url = "redis://app:hunter2@127.0.0.1:6379/0?stream=orders"
    endpoint = create_endpoint(client, headers, url)
    browser = portal_client(app, tenant)

    pages = [text(browser.get(path)) for path in
             ("/portal/endpoints", f"/portal/endpoints/{endpoint['id']}", f"/portal/endpoints/{endpoint['id']}/edit")]
    saved = portal_post(browser, f"/portal/endpoints/{endpoint['id']}/edit",
                        {"url": "redis://app:***@127.0.0.1:6379/0?stream=orders", "description": "new"})

    assert not any("hunter2" in page for page in pages)
    assert "redis://app:***@127.0.0.1:6379/0?stream=orders" in pages[1]
    assert saved.status_code == 303
    row = Endpoint.get_by_id(endpoint["id"])
    assert (row.url, row.description) == (url, "new")
