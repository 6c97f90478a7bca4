"""An event type's email templates (``email_subject``, ``email_text``, ``email_html``): checked when
written, rendered for each email a ``mailto:`` endpoint is sent, with a readable default for each
part a type has no template for.

Templates are Jinja in a sandbox (``ImmutableSandboxedEnvironment``: no attribute of Python's
insides, no changing what it is given, ``range`` bounded); the HTML one autoescapes. Each sees
``id``, ``type``, ``timestamp`` (the event's) and ``payload``; a value the payload lacks renders
empty (``ChainableUndefined``: ``payload.order.id`` too), so a template does not fail on an event
that leaves out an optional field. What a template renders is capped at ``MAX_RENDERED_CHARS``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from html import escape
from typing import Any, Iterable, Mapping

from jinja2 import ChainableUndefined, Template, TemplateError, UndefinedError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from webhooks.errors import InvalidInput

#: The three template fields of an event type, in the order a message holds them.
FIELDS = ("email_subject", "email_text", "email_html")
#: The longest template source accepted, per field (characters).
MAX_TEMPLATE_CHARS = {"email_subject": 1000, "email_text": 100_000, "email_html": 100_000}
#: The most characters one template may render: a template that renders more is an error.
MAX_RENDERED_CHARS = 1_000_000
#: A subject is one line of at most this many characters (RFC 5322's line limit, less the header name).
MAX_SUBJECT_CHARS = 900

_PLAIN = ImmutableSandboxedEnvironment(autoescape=False, undefined=ChainableUndefined, keep_trailing_newline=True)
_HTML = ImmutableSandboxedEnvironment(autoescape=True, undefined=ChainableUndefined, keep_trailing_newline=True)


class RenderError(InvalidInput):
    """A template that does not compile or render: says where and why; ``undefined`` when it used a
    value the event lacks in a way that cannot render empty (``payload.n + 1``)."""

    def __init__(self, message: str, undefined: bool = False) -> None:
        super().__init__(message)
        self.undefined = undefined


@dataclass(frozen=True)
class MailTemplates:
    """One type's templates; None: the default rendering of that part."""

    subject: str | None = None
    text: str | None = None
    html: str | None = None

    @classmethod
    def of(cls, fields: Mapping[str, str | None]) -> MailTemplates:
        return cls(fields.get("email_subject"), fields.get("email_text"), fields.get("email_html"))

    def by_field(self) -> dict[str, str | None]:
        return dict(zip(FIELDS, (self.subject, self.text, self.html)))


@dataclass(frozen=True)
class RenderedMail:
    """What one email says; ``problems`` names each template that failed (its part is the default's)."""

    subject: str
    text: str
    html: str
    problems: tuple[str, ...] = ()


def context(event_id: str, event_type: str, timestamp: str, payload: Any) -> dict[str, Any]:
    """What every template sees."""
    return {"id": event_id, "type": event_type, "timestamp": timestamp, "payload": payload}


@lru_cache(maxsize=512)
def _compiled(field: str, source: str) -> Template:
    """``source`` compiled once in its field's environment (HTML autoescapes); RenderError otherwise."""
    environment = _HTML if field == "email_html" else _PLAIN
    try:
        return environment.from_string(source)
    except TemplateError as error:
        line = getattr(error, "lineno", None)
        raise RenderError(f"does not compile{f' (line {line})' if line else ''}: {error}") from None


def render_one(field: str, source: str, values: Mapping[str, Any]) -> str:
    """``source`` rendered with ``values``; RenderError naming what went wrong."""
    template = _compiled(field, source)
    parts: list[str] = []
    size = 0
    try:
        for part in template.generate(values):
            size += len(part)
            if size > MAX_RENDERED_CHARS:
                raise RenderError(f"renders more than {MAX_RENDERED_CHARS:,} characters")
            parts.append(part)
    except RenderError:
        raise
    except Exception as error:  # noqa: BLE001 - a template's own error (sandbox, type, undefined call): a refusal
        raise RenderError(f"does not render: {type(error).__name__}: {error}",
                          undefined=isinstance(error, UndefinedError)) from None
    out = "".join(parts)
    return one_line(out) if field == "email_subject" else out


def one_line(text: str) -> str:
    """A subject: the rendered text on one line, at most ``MAX_SUBJECT_CHARS``."""
    return " ".join(text.split())[:MAX_SUBJECT_CHARS]


def default_subject(values: Mapping[str, Any]) -> str:
    return one_line(f"[{values['type']}] {values['id']}")


def default_text(values: Mapping[str, Any]) -> str:
    payload = json.dumps(values["payload"], indent=2, ensure_ascii=False, sort_keys=False)
    return f"Event {values['id']} of type {values['type']} at {values['timestamp']}\n\n{payload}\n"


def default_html(values: Mapping[str, Any]) -> str:
    payload = json.dumps(values["payload"], indent=2, ensure_ascii=False, sort_keys=False)
    return (f"<p>Event <code>{escape(str(values['id']))}</code> of type <code>{escape(str(values['type']))}</code> "
            f"at {escape(str(values['timestamp']))}</p>\n<pre>{escape(payload)}</pre>\n")


_DEFAULTS = {"email_subject": default_subject, "email_text": default_text, "email_html": default_html}


def render(templates: MailTemplates | None, values: Mapping[str, Any]) -> RenderedMail:
    """The email of one event: each part from its template, else (none, or it failed) the default."""
    rendered: dict[str, str] = {}
    problems: list[str] = []
    for field, source in (templates or MailTemplates()).by_field().items():
        if source:
            try:
                rendered[field] = render_one(field, source, values)
                continue
            except RenderError as error:
                problems.append(f"{field} {error}")
        rendered[field] = _DEFAULTS[field](values)
    return RenderedMail(rendered["email_subject"], rendered["email_text"], rendered["email_html"], tuple(problems))


#: The event a type's templates are tried on when it has no examples.
SAMPLE = context("evt_example", "example.type", "2026-01-01T00:00:00Z", {})


def problems_of(templates: Mapping[str, str | None], event_type: str, examples: Iterable[Any]) -> dict[str, list[str]]:
    """What is wrong with each template field (a 422's ``errors``): it must compile and render
    each of the type's examples (or, with none, an event with an empty payload, where a value it
    lacks is no fault of the template's)."""
    found: dict[str, list[str]] = {}
    payloads = list(examples)
    tries = [context("evt_example", event_type, SAMPLE["timestamp"], payload) for payload in payloads] or [SAMPLE]
    for field in FIELDS:
        source = templates.get(field)
        if not source:
            continue
        if len(source) > MAX_TEMPLATE_CHARS[field]:
            found[field] = [f"longer than {MAX_TEMPLATE_CHARS[field]:,} characters"]
            continue
        try:
            _compiled(field, source)
        except RenderError as error:
            found[field] = [str(error)]
            continue
        for index, values in enumerate(tries):
            try:
                render_one(field, source, values)
            except RenderError as error:
                if error.undefined and not payloads:
                    continue
                found[field] = [f"{error} (rendering {f'example {index}' if payloads else 'an event with an empty payload'})"]
                break
    return found
