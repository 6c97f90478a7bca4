"""What ingestion checks events against: this process's copy of the catalog, with each type's
validator compiled once per schema version and reused.

The copy is read again when this process wrote the catalog (``store.generation``) or after
``EVENT_TYPES_CACHE`` seconds (a change made through another process), so ingestion does
not read the catalog for every request. ``check`` is the rule: an event whose type has a
schema must validate against it; with ``EVENT_TYPES_STRICT`` its type must be in the
catalog and not archived. Nothing is written before it passes.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any, Sequence

import jsonschema_rs

from webhooks.errors import InvalidInput
from webhooks.catalog import store
from webhooks.catalog.schemas import compile_schema, failures
from webhooks.storage.models import EventType


@dataclass(frozen=True)
class Known:
    """One type as ingestion sees it."""

    archived: bool
    version: int
    validator: jsonschema_rs.Draft202012Validator | None


class EventsRejected(InvalidInput):
    """Events that break the catalog's rules; nothing was written.

    ``problems`` maps each failing item's index to its errors by field, as a 422 shows them:
    ``{"payload": {"$.amount": ["minimum: -1 is less than the minimum of 0"]}}`` or
    ``{"event_type": ["…"]}``.
    """

    def __init__(self, problems: dict[int, dict[str, Any]]) -> None:
        first = min(problems)
        super().__init__(f"{len(problems)} event(s) break the event-type catalog; the first, at index {first}: "
                         f"{json.dumps(problems[first])[:300]}")
        self.problems = problems


class Registry:
    """The catalog as ingestion reads it (one per app; thread-safe)."""

    def __init__(self, strict: bool, ttl: float) -> None:
        self.strict, self.ttl = strict, ttl
        self._lock = threading.Lock()
        self._known: dict[str, Known] = {}
        self._loaded_at = float("-inf")
        self._generation = -1
        #: (name, version) -> validator: a schema is compiled once, whatever the reloads.
        self._validators: dict[tuple[str, int], jsonschema_rs.Draft202012Validator] = {}

    def known(self) -> dict[str, Known]:
        """Every type by name, read again when stale."""
        if self._generation == store.generation and time.monotonic() - self._loaded_at < self.ttl:
            return self._known
        with self._lock:
            generation = store.generation
            rows = EventType.select(EventType.name, EventType.schema, EventType.archived_at, EventType.version)
            known = {row.name: Known(row.archived_at is not None, row.version, self._validator(row)) for row in rows}
            for name, entry in store.BUILT_IN.items():
                known[name] = Known(False, entry.version, self._validator_of(name, entry.version, entry.schema))
            self._known, self._loaded_at, self._generation = known, time.monotonic(), generation
            return known

    def _validator(self, row: EventType) -> jsonschema_rs.Draft202012Validator | None:
        return self._validator_of(row.name, row.version, row.schema)

    def _validator_of(self, name: str, version: int,
                      schema: dict[str, Any] | None) -> jsonschema_rs.Draft202012Validator | None:
        if schema is None:
            return None
        key = (name, version)
        if key not in self._validators:
            self._validators[key] = compile_schema(schema)  # checked when written
        return self._validators[key]

    def check(self, items: Sequence[Any]) -> None:
        """EventsRejected naming every item (``NewEvent``s: type, payload, test endpoint) that breaks the rules."""
        known = self.known()
        problems: dict[int, dict[str, Any]] = {}
        for index, item in enumerate(items):
            entry = known.get(item.event_type)
            # A test event reaches one endpoint its tenant chose: strictness is about what everyone receives.
            if self.strict and (entry is None or entry.archived) and item.test_endpoint is None:
                why = "is archived" if entry is not None else "is not in the event-type catalog"
                problems[index] = {"event_type": [f"{item.event_type!r} {why}: only catalog types may be posted "
                                                  f"(EVENT_TYPES_STRICT=1)"]}
                continue
            if entry is None or entry.validator is None:
                continue
            found = failures(entry.validator, item.payload)
            if found:
                payload: dict[str, list[str]] = {}
                for failure in found:
                    payload.setdefault(failure.path, []).append(f"{failure.rule}: {failure.message}")
                problems[index] = {"payload": payload}
        if problems:
            raise EventsRejected(problems)


def of_app(app: Any) -> Registry:
    """The app's registry, made on first use from its settings."""
    registry = app.extensions.get("webhooks.catalog")
    if registry is None:
        settings = app.extensions["webhooks.settings"]
        registry = app.extensions.setdefault(
            "webhooks.catalog", Registry(settings.event_types_strict, settings.event_types_cache))
    return registry
