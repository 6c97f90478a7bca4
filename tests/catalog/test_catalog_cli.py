"""``flask event-types import FILE`` (JSON or YAML, all or nothing) and ``flask event-types export``."""

from __future__ import annotations

import json
from pathlib import Path

from flask import Flask

from tests.catalog_helpers import ORDER, ORDER_SCHEMA
from webhooks.catalog import store

CATALOG_YAML = """\
event_types:
  - name: order.paid
    description: An order was paid.
    group: orders
    schema:
      type: object
      properties:
        amount: {type: number, minimum: 0}
        currency: {enum: [eur, usd]}
        paid_on: {type: string}
      required: [amount, currency]
    examples:
      - {amount: 150, currency: eur, paid_on: 2026-11-26}
  - name: order.refunded
    description: An order was refunded.
    group: orders
"""


def test_a_yaml_catalog_is_imported_then_exported_and_imported_again_unchanged(app: Flask, tmp_path: Path) -> None:
    runner = app.test_cli_runner()
    path = tmp_path / "catalog.yaml"
    path.write_text(CATALOG_YAML)
    first = runner.invoke(args=["event-types", "import", str(path)])
    assert first.exit_code == 0, first.output
    assert json.loads(first.output) == {"created": ["order.paid", "order.refunded"], "updated": [], "unchanged": []}
    paid = store.get("order.paid")
    assert paid is not None and paid.examples == [{"amount": 150, "currency": "eur", "paid_on": "2026-11-26"}]

    exported = runner.invoke(args=["event-types", "export"])
    assert exported.exit_code == 0
    assert [entry["name"] for entry in json.loads(exported.output)["event_types"]] == ["order.paid", "order.refunded"]
    json_path = tmp_path / "catalog.json"
    json_path.write_text(exported.output)
    again = runner.invoke(args=["event-types", "import", str(json_path)])
    assert json.loads(again.output) == {"created": [], "updated": [], "unchanged": ["order.paid", "order.refunded"]}
    as_yaml = runner.invoke(args=["event-types", "export", "--format", "yaml"]).output
    assert as_yaml.startswith("event_types:\n- name: order.paid\n")


def test_an_import_changes_what_the_file_changed_and_restores_archived_types(app: Flask, tmp_path: Path) -> None:
    store.create({"name": "order.paid", "description": "old", "schema": ORDER_SCHEMA, "examples": [ORDER]})
    store.create({"name": "untouched", "description": "not in the file"})
    store.archive("order.paid")
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps([{"name": "order.paid", "description": "new", "schema": ORDER_SCHEMA}]))
    result = app.test_cli_runner().invoke(args=["event-types", "import", str(path)])
    assert json.loads(result.output)["updated"] == ["order.paid"]
    paid = store.get("order.paid")
    assert paid is not None and paid.description == "new" and not paid.archived and paid.examples == []
    assert paid.version == 1  # the same schema: the same version
    assert store.get("untouched") is not None


def test_a_bad_entry_names_itself_and_nothing_is_imported(app: Flask, tmp_path: Path) -> None:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps([
        {"name": "fine.one"},
        {"name": "order.paid", "schema": ORDER_SCHEMA, "examples": [{"amount": -1, "currency": "eur"}]},
    ]))
    result = app.test_cli_runner().invoke(args=["event-types", "import", str(path)])
    assert result.exit_code == 1
    assert "order.paid" in result.output and "minimum" in result.output and "nothing was imported" in result.output
    assert store.get("fine.one") is None
    path.write_text(json.dumps({"event_types": [{"name": "bad name!"}]}))
    shape = app.test_cli_runner().invoke(args=["event-types", "import", str(path)])
    assert shape.exit_code == 1 and "entry 0 (bad name!)" in shape.output
    path.write_text("{not json")
    assert "not JSON" in app.test_cli_runner().invoke(args=["event-types", "import", str(path)]).output
