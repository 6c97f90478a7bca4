"""The catalog's entries: read, created, changed, archived and loaded from a file, with the same
checks for every writer (API, ``flask event-types import``): the schema is a usable draft
2020-12 schema and each example validates against it, and each email template compiles and
renders each example (``mail_templates``).

The operational types are built in (``webhooks.catalog.operational``): listed among the
rows, never written. Every write bumps ``generation``, so this process's ``registry``
reads the catalog again at once (other processes within ``EVENT_TYPES_CACHE``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable

from webhooks.errors import InvalidInput, NotFound
from webhooks.catalog import mail_templates, operational
from webhooks.catalog.schemas import InvalidSchema, compile_schema, failures
from webhooks.storage.db import write
from webhooks.storage.models import EventType
from webhooks.storage.timeutil import utcnow

#: Fields a writer may set (``group`` is stored as ``group_name``: ``group`` is an SQL word).
WRITABLE = ("description", "group", "schema", "examples", "deprecated", *mail_templates.FIELDS)

_generations = itertools.count(1)
#: Grows with every write in this process (``registry`` compares it with what it loaded).
generation = 0


class CatalogProblem(InvalidInput):
    """A write the catalog refuses: ``problems`` maps each field to what is wrong (a 422's ``errors``)."""

    def __init__(self, problems: dict[str, Any]) -> None:
        super().__init__("; ".join(f"{field}: {problem}" for field, problem in problems.items()))
        self.problems = problems


class UnknownEventType(NotFound):
    """No such event type in the catalog."""


class EventTypeExists(InvalidInput):
    """``create`` of a name the catalog has (archived or not)."""


class BuiltIn(InvalidInput):
    """The operational types are the service's: they cannot be written."""


@dataclass(frozen=True)
class Entry:
    """An event type as shown: the row's fields, ``archived``, and whether it is built in."""

    name: str
    description: str
    group: str | None
    schema: dict[str, Any] | None
    examples: list[dict[str, Any]]
    deprecated: bool
    archived: bool
    version: int
    created_at: datetime | None
    updated_at: datetime | None
    operational: bool = False
    #: Email templates (``mail_templates``); None: the default rendering of that part.
    email_subject: str | None = None
    email_text: str | None = None
    email_html: str | None = None


def _entry(row: EventType) -> Entry:
    return Entry(row.name, row.description, row.group_name, row.schema, row.examples, row.deprecated,
                 row.archived_at is not None, row.version, row.created_at, row.updated_at, False,
                 row.email_subject, row.email_text, row.email_html)


#: The built-in entries, by name.
BUILT_IN: dict[str, Entry] = {
    name: Entry(name, description, operational.GROUP, schema, examples, False, False, 1, None, None, True)
    for name, (description, schema, examples) in operational.ENTRIES.items()
}


def check(schema: dict[str, Any] | None, examples: list[dict[str, Any]]) -> None:
    """CatalogProblem when ``schema`` is no usable schema or an example does not validate against it."""
    if schema is None:
        return
    try:
        validator = compile_schema(schema)
    except InvalidSchema as error:
        raise CatalogProblem({"schema": [str(error)]}) from None
    bad = {}
    for index, example in enumerate(examples):
        found = failures(validator, example)
        if found:
            bad[str(index)] = {failure.path: [f"{failure.rule}: {failure.message}"] for failure in found}
    if bad:
        raise CatalogProblem({"examples": bad})


def check_templates(name: str, templates: dict[str, str | None], examples: list[dict[str, Any]]) -> None:
    """CatalogProblem naming each email template that does not compile or render an example."""
    problems = mail_templates.problems_of(templates, name, examples)
    if problems:
        raise CatalogProblem(problems)


def _templates_of(fields: dict[str, Any], row: EventType | None = None) -> dict[str, str | None]:
    """The templates an entry will have: those ``fields`` sets, else the row's."""
    return {field: fields.get(field, getattr(row, field) if row is not None else None)
            for field in mail_templates.FIELDS}


def _bump() -> None:
    global generation
    generation = next(_generations)


def get(name: str) -> Entry | None:
    """The entry named ``name`` (archived ones too), or None."""
    if name in BUILT_IN:
        return BUILT_IN[name]
    row = EventType.get_or_none(EventType.name == name)
    return None if row is None else _entry(row)


def email_templates() -> dict[str, mail_templates.MailTemplates]:
    """The email templates of every type that has one, by name (what a worker keeps a copy of)."""
    has_one = EventType.email_subject.is_null(False) | EventType.email_text.is_null(False) | EventType.email_html.is_null(False)
    rows = EventType.select(EventType.name, EventType.email_subject, EventType.email_text, EventType.email_html).where(has_one)
    return {row.name: mail_templates.MailTemplates(row.email_subject, row.email_text, row.email_html) for row in rows}


def page(*, limit: int, after: str | None = None, group: str | None = None,
         include_archived: bool = False) -> dict[str, Any]:
    """``{data, next_cursor, has_more}``: entries by name after ``after``, the built-in ones among them."""
    query = EventType.select()
    if after is not None:
        query = query.where(EventType.name > after)
    if group is not None:
        query = query.where(EventType.group_name == group)
    if not include_archived:
        query = query.where(EventType.archived_at.is_null())
    rows = [_entry(row) for row in query.order_by(EventType.name).limit(limit + 1)]
    rows += [entry for name, entry in BUILT_IN.items()
             if (after is None or name > after) and group in (None, entry.group)]
    rows.sort(key=lambda entry: entry.name)
    has_more = len(rows) > limit
    rows = rows[:limit]
    return {"data": rows, "next_cursor": rows[-1].name if has_more else None, "has_more": has_more}


def groups() -> list[str]:
    """Every group name in use, the built-in ``operational`` among them, sorted."""
    rows = EventType.select(EventType.group_name).where(EventType.group_name.is_null(False)).distinct()
    return sorted({row.group_name for row in rows} | {entry.group for entry in BUILT_IN.values() if entry.group})


def every_entry(include_archived: bool = True) -> list[Entry]:
    """The whole catalog written by the platform, by name (``export``; the built-in types are not in it)."""
    query = EventType.select().order_by(EventType.name)
    if not include_archived:
        query = query.where(EventType.archived_at.is_null())
    return [_entry(row) for row in query]


def _writable(name: str) -> None:
    if name in BUILT_IN:
        raise BuiltIn(f"{name!r} is an operational event type, built in: it cannot be changed")


def _row_fields(fields: dict[str, Any]) -> dict[str, Any]:
    out = {("group_name" if key == "group" else key): value for key, value in fields.items() if key in WRITABLE}
    for field in mail_templates.FIELDS:
        if field in out:
            out[field] = out[field] or None  # "": no template
    return out


def create(fields: dict[str, Any]) -> Entry:
    """A new entry (``fields`` as ``spec.EventTypeCreateSchema`` loads them); EventTypeExists if the name is taken."""
    _writable(fields["name"])
    check(fields.get("schema"), fields.get("examples", []))
    check_templates(fields["name"], _templates_of(fields), fields.get("examples", []))
    now = utcnow()
    with write():
        if EventType.select().where(EventType.name == fields["name"]).exists():
            raise EventTypeExists(f"event type {fields['name']!r} exists already: change it with PATCH"
                                  " (an archived one too, with archived: false)")
        row = EventType.create(name=fields["name"], created_at=now, updated_at=now, **_row_fields(fields))
    _bump()
    return _entry(row)


def _changed(row: EventType, changes: dict[str, Any], now: datetime) -> dict[str, Any]:
    """The columns ``changes`` sets on ``row`` (the version grows when the schema changes)."""
    columns = _row_fields(changes)
    schema = changes.get("schema", row.schema)
    examples = changes.get("examples", row.examples)
    if "schema" in changes or "examples" in changes:
        check(schema, examples)
    if "examples" in changes or any(field in changes for field in mail_templates.FIELDS):
        check_templates(row.name, _templates_of(changes, row), examples)
    if "schema" in changes and changes["schema"] != row.schema:
        columns["version"] = row.version + 1
    if "archived" in changes and changes["archived"] != (row.archived_at is not None):
        columns["archived_at"] = now if changes["archived"] else None
    columns = {key: value for key, value in columns.items() if getattr(row, key) != value}
    if columns:
        columns["updated_at"] = now
    return columns


def update(name: str, changes: dict[str, Any]) -> Entry:
    """Change an entry (``archived: false`` restores it); UnknownEventType, BuiltIn or CatalogProblem."""
    _writable(name)
    now = utcnow()
    with write():
        row = EventType.get_or_none(EventType.name == name)
        if row is None:
            raise UnknownEventType(f"no event type {name!r} in the catalog")
        columns = _changed(row, changes, now)
        if columns:
            EventType.update(**columns).where(EventType.name == name).execute()
            row = EventType.get_by_id(name)
    _bump()
    return _entry(row)


def archive(name: str) -> Entry:
    """Archive an entry: kept with its history, left out of lists, refused at ingest when strict."""
    return update(name, {"archived": True})


@dataclass
class Loaded:
    """What ``load`` did: names created, changed, and left as they were."""

    created: list[str]
    updated: list[str]
    unchanged: list[str]


def load(entries: Iterable[dict[str, Any]]) -> Loaded:
    """Create or change each entry (loaded by ``spec.EventTypeCreateSchema``), all in one transaction.

    Entries of the catalog that the file does not name are left alone. An archived entry the
    file names is restored (the file says it is wanted). CatalogProblem, keyed by the entry's
    name, for the first entry that does not pass the checks: nothing is written then.
    """
    loaded = Loaded([], [], [])
    now = utcnow()
    with write():
        for fields in entries:
            name = fields["name"]
            _writable(name)
            try:
                check(fields.get("schema"), fields.get("examples", []))
                check_templates(name, _templates_of(fields), fields.get("examples", []))
                row = EventType.get_or_none(EventType.name == name)
                if row is None:
                    EventType.create(name=name, created_at=now, updated_at=now, **_row_fields(fields))
                    loaded.created.append(name)
                    continue
                defaults = {"description": "", "group": None, "schema": None, "examples": [], "deprecated": False,
                            **dict.fromkeys(mail_templates.FIELDS)}
                columns = _changed(row, {**defaults, **fields, "archived": False}, now)
            except CatalogProblem as problem:
                raise CatalogProblem({name: problem.problems}) from None
            if columns:
                EventType.update(**columns).where(EventType.name == name).execute()
                loaded.updated.append(name)
            else:
                loaded.unchanged.append(name)
    _bump()
    return loaded


def as_file_entry(entry: Entry) -> dict[str, Any]:
    """An entry as ``flask event-types export`` writes it (what ``import`` reads back)."""
    out: dict[str, Any] = {"name": entry.name, "description": entry.description}
    if entry.group is not None:
        out["group"] = entry.group
    if entry.schema is not None:
        out["schema"] = entry.schema
    if entry.examples:
        out["examples"] = entry.examples
    if entry.deprecated:
        out["deprecated"] = True
    for field in mail_templates.FIELDS:
        if getattr(entry, field):
            out[field] = getattr(entry, field)
    return out
