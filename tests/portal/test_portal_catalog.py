"""The catalog in the portal: the list of event types by group (fields, schema, examples), the
endpoint form's types picked from it and its filter (checked as the API checks it), the filter
test (the API's answer, in words) and "send an example" (capabilities, CSRF, the audit log)."""

from __future__ import annotations

import html
from types import SimpleNamespace

from flask import Flask
from flask.testing import FlaskClient

from tests.api_helpers import create_endpoint, send
from tests.catalog_helpers import ORDER, PAID_OVER_100, sample_catalog
from tests.portal_helpers import portal_client, portal_post
from webhooks.console.models import AuditEntry
from webhooks.storage.models import Delivery, Endpoint, Event

def text(response) -> str:  # type: ignore[no-untyped-def]
    return html.unescape(response.get_data(as_text=True))


def test_the_portal_lists_the_catalog_by_group_with_fields_schema_and_examples(app: Flask,
                                                                               tenant: SimpleNamespace) -> None:
    sample_catalog()
    raw = portal_client(app, tenant, ["view"]).get("/portal/event-types?include_archived=true").get_data(as_text=True)
    page = html.unescape(raw)

    headings = [page.index(f">{name} <span") for name in ("customers", "operational", "orders", "Other types")]
    assert headings == sorted(headings)  # by name, the types without a group last
    assert page.index(">customers <span") < page.index('id="type-customer.created"') < page.index(">orders <span")
    assert 'class="badge deprecated"' in raw and "order.legacy" in page
    assert "order.gone" not in page  # archived types are not shown to customers, even when asked
    assert '<td class="depth-1"><code title="customer.address">address</code>' in page  # nested, indented
    assert '<td class="depth-2"><code title="customer.address.city">city</code>' in page
    assert '<code title="tags[].label">label</code>' in page and 'pattern "^cus_"' in page
    assert "<summary>JSON Schema (version 1)</summary>" in page  # the raw schema, collapsed
    assert '"city": "Lyon"' in page  # the example, as indented JSON
    assert "endpoint.offline" in page and "No schema: any JSON object" in page


def test_the_endpoint_form_offers_the_catalogs_types_by_group_and_the_others_sent(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace, headers: dict[str, str]
) -> None:
    sample_catalog()
    send(client, headers, "order.paid", payload=ORDER)
    send(client, headers, "invoice.paid", payload={"invoice": 1})
    page = text(portal_client(app, tenant).get("/portal/endpoints/new"))

    order = page.index('value="order.paid"')
    assert page.index(">orders</h3>") < order < page.index("An order was paid.") < page.index(">Sent so far, not in")
    assert "(1 sent)" in page[order:order + 300]
    assert page.index(">Sent so far, not in the catalog</h3>") < page.index('value="invoice.paid"')
    assert 'aria-describedby="type-customer.created-about"' in page and "A customer signed up." in page
    assert 'value="order.gone"' not in page and 'value="endpoint.offline"' in page


def test_a_filter_that_cannot_be_used_is_shown_beside_its_field_and_nothing_is_written(
    app: Flask, tenant: SimpleNamespace
) -> None:
    browser = portal_client(app, tenant)
    form = {"url": "http://127.0.0.1:9/hook", "event_types": "order.paid"}

    wrong = portal_post(browser, "/portal/endpoints/new", {**form, "filter": '{"data": {"amount": {"$gte": [1]}}}'})
    not_json = portal_post(browser, "/portal/endpoints/new", {**form, "filter": '{"data": '})

    assert wrong.status_code == not_json.status_code == 400
    assert 'href="#field-filter"' in text(wrong)
    assert '<span class="field-error" id="error-filter"><span class="visually-hidden">Error:</span> Filter: ' \
           "data.amount.$gte: takes a number or a string, not [1]</span>" in text(wrong)
    assert '{"data": {"amount": {"$gte": [1]}}}</textarea>' in text(wrong)  # as typed, to correct it
    assert "Filter: not JSON (Expecting value: line 1 column 10" in text(not_json)
    assert Endpoint.select().count() == 0


def test_a_filter_is_saved_with_the_endpoint_shown_as_json_and_removed_when_emptied(
    app: Flask, tenant: SimpleNamespace
) -> None:
    browser = portal_client(app, tenant)
    created = portal_post(browser, "/portal/endpoints/new",
                          {"url": "http://127.0.0.1:9/hook", "event_types": "order.paid", "filter": PAID_OVER_100})
    assert created.status_code == 303
    endpoint = Endpoint.get()
    assert endpoint.filter == {"data": {"currency": "eur", "amount": {"$gte": 100}}}
    assert "only events matching its filter" in text(browser.get(f"/portal/endpoints/{endpoint.id}"))
    form = text(browser.get(f"/portal/endpoints/{endpoint.id}/edit"))
    assert '"$gte": 100' in form and "Test a filter against an example event" in form

    untouched = portal_post(browser, f"/portal/endpoints/{endpoint.id}/edit",  # a form without the field
                            {"url": endpoint.url, "event_types": "order.paid"})
    assert untouched.status_code == 303 and Endpoint.get_by_id(endpoint.id).filter == endpoint.filter
    emptied = portal_post(browser, f"/portal/endpoints/{endpoint.id}/edit",
                          {"url": endpoint.url, "event_types": "order.paid", "filter": "  "})
    assert emptied.status_code == 303 and Endpoint.get_by_id(endpoint.id).filter is None


def test_the_filter_test_answers_as_the_api_does_and_names_the_failed_condition(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace, headers: dict[str, str]
) -> None:
    sample_catalog()
    endpoint = create_endpoint(client, headers, event_types=["order.paid"])
    browser = portal_client(app, tenant, ["view"])
    path = f"/portal/endpoints/{endpoint['id']}/filter"

    first = text(browser.get(path))
    assert '<option value="order.paid" selected>' in first and '"amount": 150' in first  # its example, prefilled

    matches = portal_post(browser, path, {"event_type": "order.paid", "payload": '{"amount": 150, "currency": "eur"}',
                                          "filter": PAID_OVER_100})
    assert matches.status_code == 200 and "would be delivered" in text(matches)
    assert "this endpoint receives it" in text(matches) and "Failed condition" not in text(matches)

    fails = portal_post(browser, path, {"event_type": "order.paid", "payload": '{"amount": 50, "currency": "eur"}',
                                        "filter": PAID_OVER_100})
    api = client.post(f"/v1/endpoints/{endpoint['id']}/filter/test", headers=headers,
                      json={"event_type": "order.paid", "payload": {"amount": 50, "currency": "eur"},
                            "filter": {"data": {"currency": "eur", "amount": {"$gte": 100}}}}).json
    assert api["matches"] is False and "would not be delivered" in text(fails)
    assert f'<code class="failed-condition">{api["failed"]}</code>' in text(fails)
    assert api["failed"] == 'data.amount: {"$gte": 100} does not hold; the value is 50'

    other = text(portal_post(browser, path, {"event_type": "customer.created", "payload": "{}", "filter": ""}))
    assert "matches (no filter: every event matches)" in other and "this endpoint does not receive it" in other


def test_the_filter_test_takes_a_types_example_and_says_what_is_wrong(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace, headers: dict[str, str]
) -> None:
    sample_catalog()
    endpoint = create_endpoint(client, headers)
    browser = portal_client(app, tenant, ["view"])
    path = f"/portal/endpoints/{endpoint['id']}/filter"

    example = text(portal_post(browser, path, {"event_type": "customer.created", "payload": "", "action": "example",
                                               "filter": ""}))
    assert '"city": "Lyon"' in example and "would be" not in example
    none = text(portal_post(browser, path, {"event_type": "ping", "payload": '{"a": 1}', "action": "example"}))
    assert "The catalog has no example of ping" in none and '{"a": 1}</textarea>' in none

    wrong = portal_post(browser, path, {"event_type": "order paid", "payload": "[1]", "filter": '{"$regex": 1}'})
    assert wrong.status_code == 400
    assert "Event type: choose an event type" in text(wrong) and "Payload: must be a JSON object" in text(wrong)
    bad_filter = portal_post(browser, path, {"event_type": "order.paid", "payload": "{}", "filter": '{"$regex": 1}'})
    assert bad_filter.status_code == 400 and "Filter: $regex: unknown operator '$regex'" in text(bad_filter)


def test_saving_the_tested_filter_needs_manage_endpoints_and_is_audited(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace, headers: dict[str, str]
) -> None:
    endpoint = create_endpoint(client, headers)
    path = f"/portal/endpoints/{endpoint['id']}/filter"
    form = {"event_type": "order.paid", "payload": '{"amount": 5}', "filter": PAID_OVER_100, "action": "save"}

    viewer = portal_client(app, tenant, ["view"])
    assert "Save this filter" not in text(viewer.get(path))
    assert portal_post(viewer, path, form).status_code == 403
    assert Endpoint.get_by_id(endpoint["id"]).filter is None

    saved = portal_post(portal_client(app, tenant, ["manage_endpoints"]), path, form)
    assert saved.status_code == 303 and saved.location.endswith(f"/portal/endpoints/{endpoint['id']}")
    assert Endpoint.get_by_id(endpoint["id"]).filter == {"data": {"currency": "eur", "amount": {"$gte": 100}}}
    entry = AuditEntry.get(AuditEntry.action == "update")
    assert entry.actor.startswith(f"portal:{tenant.id}:") and entry.target_id == endpoint["id"]


def test_the_endpoint_page_lists_the_types_it_receives_with_a_send_example_button_for_managers(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace, headers: dict[str, str]
) -> None:
    sample_catalog()
    endpoint = create_endpoint(client, headers, event_types=["order.paid", "ping", "not.listed"])
    path = f"/portal/endpoints/{endpoint['id']}"

    page = text(portal_client(app, tenant, ["manage_endpoints"]).get(path))
    assert page.count('aria-label="Send an example of') == 1 and 'aria-label="Send an example of order.paid"' in page
    assert "An order was paid." in page and "not in the catalog" in page
    assert "Send an example" not in text(portal_client(app, tenant, ["view"]).get(path))
    every = create_endpoint(client, headers)  # every type but the operational ones
    listed = text(portal_client(app, tenant).get(f"/portal/endpoints/{every['id']}"))
    assert 'Send an example of customer.created"' in listed and "Send an example of endpoint.offline" not in listed


def test_sending_an_example_makes_a_test_event_for_that_endpoint_alone(
    app: Flask, client: FlaskClient, tenant: SimpleNamespace, headers: dict[str, str]
) -> None:
    sample_catalog()
    endpoint = create_endpoint(client, headers, event_types=["order.paid"])
    bystander = create_endpoint(client, headers)
    path = f"/portal/endpoints/{endpoint['id']}/send-example"
    manager = portal_client(app, tenant, ["manage_endpoints"])

    assert manager.post(path, data={"event_type": "order.paid"}).status_code == 400  # no CSRF token
    assert portal_post(portal_client(app, tenant, ["view"]), path, {"event_type": "order.paid"}).status_code == 403
    assert portal_post(manager, path, {"event_type": "ping"}).status_code == 404  # no example
    assert Event.select().count() == 0

    sent = portal_post(manager, path, {"event_type": "order.paid"})
    event = Event.get()
    assert sent.status_code == 303 and sent.location.endswith(f"/portal/events/{event.id}")
    assert (event.event_type, event.payload, event.test) == ("order.paid", ORDER, True)
    assert [d.endpoint_id for d in Delivery.select()] == [endpoint["id"]]
    assert Delivery.select().where(Delivery.endpoint == bystander["id"]).count() == 0
    entry = AuditEntry.get(AuditEntry.action == "send_example")
    assert entry.actor.startswith(f"portal:{tenant.id}:") and entry.target_id == endpoint["id"]
    assert "Example of order.paid sent." in text(manager.get(sent.location))
