"""The operational event types are in the catalog with schemas their examples, and the service's own
alert payloads, validate against."""

from __future__ import annotations

from datetime import datetime

from webhooks.catalog import operational
from webhooks.catalog.schemas import compile_schema, failures
from webhooks.event_types import OPERATIONAL_EVENT_TYPES
from webhooks.health.alert_emails import DATA_KEYS
from webhooks.storage.timeutil import isoformat


def test_every_operational_type_is_in_the_catalog_with_a_schema_its_examples_pass() -> None:
    assert operational.ENTRIES.keys() == OPERATIONAL_EVENT_TYPES
    for name, (_, schema, examples) in operational.ENTRIES.items():
        validator = compile_schema(schema)
        assert examples and all(failures(validator, example) == [] for example in examples), name


def test_what_the_service_raises_fits_the_schemas() -> None:
    values = {"endpoint_id": "ep_1", "url": "https://example.com/h", "reason": "HTTP 503", "health": "offline",
              "delivery_id": "dlv_1", "event_id": "evt_1", "event_type": "order.paid", "attempts": 10,
              "last_error": None}
    for kind, keys in DATA_KEYS.items():  # the keys ``presence.raise_alert`` puts in an alert, as its event's payload
        payload = {key: values[key] for key in keys} | {"occurred_at": isoformat(datetime(2026, 11, 26))}
        assert failures(compile_schema(operational.ENTRIES[kind][1]), payload) == [], kind
