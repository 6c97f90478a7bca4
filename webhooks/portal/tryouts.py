"""What the portal offers to try an endpoint out with the catalog: the types it receives (each with
its catalog entry, whose example can be sent), and the form that tests a filter against an event
(``webhooks.catalog.examples.try_filter``, the code of ``POST /v1/endpoints/<id>/filter/test``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from werkzeug.datastructures import MultiDict

from webhooks.catalog import examples, store
from webhooks.catalog.filters import FilterError
from webhooks.catalog.store import Entry
from webhooks.event_types import EVENT_TYPE_PATTERN, wants
from webhooks.pages.errors import FieldErrors
from webhooks.pages.text import pretty_json
from webhooks.portal.forms import read_json
from webhooks.storage.models import Endpoint

#: The filter-test form's fields, in the order it shows them (the error summary follows it).
FIELDS = ("event_type", "payload", "filter")

_NAME = re.compile(EVENT_TYPE_PATTERN)


@dataclass(frozen=True)
class Received:
    """A type an endpoint receives: its name and, when the catalog has it, its entry."""

    name: str
    entry: Entry | None

    @property
    def has_example(self) -> bool:
        return self.entry is not None and bool(self.entry.examples)


def received_types(endpoint: Endpoint, entries: list[Entry]) -> list[Received]:
    """The types ``endpoint`` receives: those it lists (in or out of the catalog), or when it lists
    none, every type of the catalog but the operational ones (which must be listed)."""
    if endpoint.event_types:
        listed = {entry.name: entry for entry in entries}
        return [Received(name, listed[name] if name in listed else store.get(name)) for name in endpoint.event_types]
    return [Received(entry.name, entry) for entry in entries if wants([], entry.name)]


def filter_text(spec: Any) -> str:
    """A filter as the form shows it: indented JSON, nothing for none."""
    return pretty_json(spec) if spec else ""


def example_text(event_type: str) -> str | None:
    """The first example of ``event_type`` as indented JSON, or None when the catalog has none."""
    try:
        return pretty_json(examples.example_of(event_type))
    except examples.NoExample:
        return None


@dataclass
class FilterTest:
    """The filter-test form: what it shows (``values``), its errors, and the answer once run."""

    values: dict[str, str]
    errors: FieldErrors = field(default_factory=FieldErrors)
    verdict: examples.FilterVerdict | None = None
    #: The payload and the filter read from the form (the filter is what "save" stores, once it ran).
    payload: dict[str, Any] = field(default_factory=dict)
    spec: Any = None
    #: The type asked for has no example in the catalog (so the payload was left as it was).
    no_example: bool = False

    @classmethod
    def first(cls, endpoint: Endpoint, received: list[Received], event_type: str | None = None) -> FilterTest:
        """The form as first shown: the asked type (else the first received type with an example), its
        example as the payload, the endpoint's own filter."""
        if not event_type or not _NAME.fullmatch(event_type):
            event_type = next((r.name for r in received if r.has_example), received[0].name if received else "")
        payload = example_text(event_type) if event_type else None
        return cls({"event_type": event_type, "payload": payload or "{}", "filter": filter_text(endpoint.filter)},
                   no_example=bool(event_type) and payload is None)

    @classmethod
    def read(cls, form: MultiDict[str, str]) -> FilterTest:
        """The form as posted, its fields checked (the event type's name, the payload and filter as JSON)."""
        test = cls({name: form.get(name, "") for name in FIELDS})
        test.values["event_type"] = test.values["event_type"].strip()
        if not _NAME.fullmatch(test.values["event_type"]):
            test.errors["event_type"] = "Event type: choose an event type (letters, digits, _ . - only)"
        payload, problem = read_json(test.values["payload"], "Payload")
        if problem or not isinstance(payload, dict):
            test.errors["payload"] = problem or "Payload: must be a JSON object, such as {\"amount\": 150}"
        test.spec, problem = read_json(test.values["filter"], "Filter")
        if problem:
            test.errors["filter"] = problem
        test.payload = payload if isinstance(payload, dict) else {}
        return test

    def use_example(self) -> None:
        """Put the chosen type's example in the payload (a note when the catalog has none)."""
        example = example_text(self.values["event_type"]) if "event_type" not in self.errors else None
        self.errors.pop("payload", None)
        if example is None:
            self.no_example = True
        else:
            self.values["payload"] = example

    def run(self, endpoint: Endpoint) -> None:
        """Test the form's filter against its event, as ``POST /v1/endpoints/<id>/filter/test`` does
        (the filter is checked as when an endpoint is saved: its problem goes beside the field)."""
        if self.errors:
            return
        try:
            self.verdict = examples.try_filter(endpoint, self.values["event_type"], self.payload, self.spec,
                                               use_endpoint_filter=False)
        except FilterError as error:
            self.errors["filter"] = f"Filter: {error.path}: {error.message}" if error.path else f"Filter: {error.message}"
