"""An event type's email templates (``email_subject``, ``email_text``, ``email_html``): written with the
catalog, checked when written (a template that does not compile or render an example is a 422, and
nothing is written), rendered in a sandbox, exported and imported with the rest of the entry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from tests.catalog_helpers import ORDER, order_type
from webhooks.catalog import store
from webhooks.catalog.mail_templates import MailTemplates, context, render

TEMPLATES = {
    "email_subject": "Order paid: {{ payload.amount }} {{ payload.currency|upper }}",
    "email_text": "{{ payload.amount }} {{ payload.currency }} paid ({{ id }} at {{ timestamp }})\n",
    "email_html": "<p>{{ payload.amount }} <b>{{ payload.currency }}</b></p>",
}


def test_templates_are_written_and_read_back_with_the_event_type(
        client: FlaskClient, writer: dict[str, str], headers: dict[str, str]) -> None:
    created = client.post("/v1/event-types", json=order_type(**TEMPLATES), headers=writer)
    changed = client.patch("/v1/event-types/order.paid", json={"email_text": ""}, headers=writer)
    shown = client.get("/v1/event-types/order.paid", headers=headers).json

    assert created.status_code == 201 and created.json["email_subject"] == TEMPLATES["email_subject"]
    assert changed.status_code == 200 and changed.json["email_text"] is None  # "": none, the default rendering
    assert (shown["email_subject"], shown["email_text"], shown["email_html"]) == (
        TEMPLATES["email_subject"], None, TEMPLATES["email_html"])


@pytest.mark.parametrize(("field", "template", "problem"), [
    ("email_subject", "Order {{ payload.amount ", "does not compile (line 1)"),
    ("email_html", "{% for x in payload %}", "does not compile"),
    ("email_text", "{{ payload.amount|no_such_filter }}", "does not compile"),
    ("email_text", "{{ payload.amount + 'x' }}", "does not render: TypeError"),
    ("email_html", "{{ payload.__class__.__subclasses__() }}", "does not render: SecurityError"),  # no way out
])
def test_a_template_that_does_not_compile_or_render_an_example_is_a_422_and_nothing_is_written(
        client: FlaskClient, writer: dict[str, str], field: str, template: str, problem: str) -> None:
    response = client.post("/v1/event-types", json=order_type(**{field: template}), headers=writer)

    assert response.status_code == 422, response.json
    (message,) = response.json["errors"]["json"][field]
    assert message.startswith(problem)
    assert client.get("/v1/event-types/order.paid", headers=writer).status_code == 404


def test_a_change_of_examples_is_checked_against_the_templates_the_type_has(
        client: FlaskClient, writer: dict[str, str]) -> None:
    client.post("/v1/event-types", json=order_type(schema=None, email_text="{{ payload.amount - 1 }}"), headers=writer)

    refused = client.patch("/v1/event-types/order.paid", json={"examples": [ORDER, {"amount": "ten"}]}, headers=writer)

    assert refused.status_code == 422
    assert refused.json["errors"]["json"]["email_text"] == [
        "does not render: TypeError: unsupported operand type(s) for -: 'str' and 'int' (rendering example 1)"]
    entry = store.get("order.paid")
    assert entry is not None and entry.examples == [ORDER]


def test_without_examples_a_template_may_use_fields_the_empty_sample_lacks(
        client: FlaskClient, writer: dict[str, str]) -> None:
    response = client.post("/v1/event-types", json={"name": "user.created", "email_text": "{{ payload.user.id + 1 }}"},
                           headers=writer)
    syntax = client.post("/v1/event-types", json={"name": "user.deleted", "email_text": "{{ payload.user.id + }}"},
                         headers=writer)

    assert response.status_code == 201, response.json
    assert syntax.status_code == 422 and syntax.json["errors"]["json"]["email_text"][0].startswith("does not compile")


def test_html_is_escaped_and_text_is_not_and_a_missing_value_renders_empty() -> None:
    templates = MailTemplates("{{ payload.name }}\n{{ payload.nothing.deeper }}!", "{{ payload.name }}",
                              "<p>{{ payload.name }}{{ payload.nothing.deeper }}</p>")
    mail = render(templates, context("evt_1", "user.created", "2026-11-26T00:00:00Z", {"name": "<b>Ann</b>"}))

    assert mail.subject == "<b>Ann</b> !"  # one line
    assert mail.text == "<b>Ann</b>"
    assert mail.html == "<p>&lt;b&gt;Ann&lt;/b&gt;</p>"
    assert mail.problems == ()


def test_a_type_without_templates_gets_a_readable_default() -> None:
    mail = render(None, context("evt_1", "order.paid", "2026-11-26T00:00:00Z", {"note": "<tag> & co"}))

    assert mail.subject == "[order.paid] evt_1"
    assert mail.text == 'Event evt_1 of type order.paid at 2026-11-26T00:00:00Z\n\n{\n  "note": "<tag> & co"\n}\n'
    assert "<pre>{\n  &quot;note&quot;: &quot;&lt;tag&gt; &amp; co&quot;\n}</pre>" in mail.html


def test_a_template_that_fails_on_one_event_falls_back_to_the_default_and_says_so() -> None:
    mail = render(MailTemplates(text="{{ payload.n + 1 }}"), context("evt_1", "t.x", "2026-11-26T00:00:00Z", {"n": "a"}))

    assert mail.text.startswith("Event evt_1 of type t.x")
    assert len(mail.problems) == 1 and mail.problems[0].startswith("email_text does not render: TypeError")


def test_templates_are_exported_and_imported_with_the_catalog(app: Flask, tmp_path: Path) -> None:
    runner = app.test_cli_runner()
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"event_types": [{"name": "order.paid", "examples": [ORDER], **TEMPLATES}]}))
    assert runner.invoke(args=["event-types", "import", str(path)]).exit_code == 0

    exported = json.loads(runner.invoke(args=["event-types", "export"]).output)["event_types"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"event_types": [{"name": "order.paid", "examples": [ORDER], "email_html": "{% if %}"}]}))
    refused = runner.invoke(args=["event-types", "import", str(bad)])

    assert exported == [{"name": "order.paid", "description": "", "examples": [ORDER], **TEMPLATES}]
    assert refused.exit_code != 0 and "email_html" in refused.output
    entry = store.get("order.paid")
    assert entry is not None and entry.email_html == TEMPLATES["email_html"]  # nothing written
