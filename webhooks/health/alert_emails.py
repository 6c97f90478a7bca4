"""Alert emails: render an ``Alert`` with a digest of what waits for its endpoint (Jinja, text + HTML),
and ``send_pending`` for the clock: claim, send by SMTP, mark, one row at a time.
"""

from __future__ import annotations

import logging
import re
import secrets
from datetime import datetime, timedelta
from email.message import EmailMessage
from email.utils import formatdate, parseaddr
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, urlsplit

import jinja2

from webhooks.health.alert_digest import Digest, digest_for
from webhooks.storage.db import connection, write
from webhooks.health.mailer import MailError, SmtpConfig, send
from webhooks.storage.models import Alert, Endpoint, Tenant
from webhooks.storage.timeutil import isoformat, utcnow

__all__ = ["DATA_KEYS", "Digest", "digest_for", "recipient", "render", "send_pending"]

log = logging.getLogger(__name__)

#: Keys the producer (``presence.raise_alert``) puts in ``Alert.data``, by alert kind; a missing
#: one renders as ``UNKNOWN``. ``health`` is the state entered; ``reason`` says why.
PRESENCE_KEYS: tuple[str, ...] = ("endpoint_id", "url", "reason", "health")
DATA_KEYS: dict[str, tuple[str, ...]] = {
    "endpoint.offline": PRESENCE_KEYS,
    "endpoint.online": PRESENCE_KEYS,
    "endpoint.disabled": PRESENCE_KEYS,
    "delivery.exhausted": ("endpoint_id", "url", "reason", "delivery_id", "event_id", "event_type", "attempts",
                           "last_error"),
}

#: How a missing data key reads in an email.
UNKNOWN = "(unknown)"

#: Starts every subject, so recipients can filter on it.
SUBJECT_PREFIX = "[webhooks]"

#: Subjects are cut here (a URL may be long); the body has everything in full.
MAX_SUBJECT_CHARS = 200

#: Error text kept in ``email_status`` is cut here.
MAX_STATUS_CHARS = 500

#: A ``sending`` claim older than this is from a sender that died; another may take it over.
#: Far above a send's worst case (each SMTP step is bounded by the send timeout).
CLAIM_TTL = timedelta(minutes=10)

#: After a failed send, an alert older than this is given up instead of retried.
GIVE_UP_AFTER = timedelta(hours=24)

#: Seconds per SMTP network operation.
SEND_TIMEOUT = 10.0

_CLAIM = re.compile(r"^sending since (\S+) ")

_RENDER_ERRORS = (jinja2.TemplateError, LookupError, TypeError, ValueError)


def _endpoint_id(alert: Alert) -> str | None:
    return alert.endpoint_id or (alert.data or {}).get("endpoint_id")


def recipient(alert: Alert) -> str | None:
    """The endpoint's ``contact_email``, else its tenant's, else None (blank counts as none)."""
    endpoint_id = _endpoint_id(alert)
    lookups = [Tenant.select(Tenant.contact_email).where(Tenant.id == alert.tenant_id)]
    if endpoint_id is not None:
        lookups.insert(0, Endpoint.select(Endpoint.contact_email).where(Endpoint.id == endpoint_id))
    for lookup in lookups:
        contact = (lookup.scalar() or "").strip()
        if contact:
            return str(contact)
    return None


def _format_age(age: timedelta) -> str:
    """``2 d 3 h``, ``3 h 10 min``, ``4 min``, ``12 s``: the two largest units."""
    seconds = int(age.total_seconds())
    days, hours, minutes = seconds // 86_400, seconds // 3_600 % 24, seconds // 60 % 60
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min" if minutes else f"{seconds} s"


def _format_utc(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC")


_templates = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
    # Only the HTML layout escapes. The per-kind wording is plain text, so it reaches the
    # HTML layout as ordinary strings and is escaped there exactly once.
    autoescape=jinja2.select_autoescape(enabled_extensions=("html",), default_for_string=False, default=False),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_templates.filters.update(age=_format_age, utc=_format_utc)


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())  # no CR/LF: a header cannot be split by customer text
    return text if len(text) <= limit else text[: limit - 1] + "…"


def render(alert: Alert, digest: Digest, public_url: str) -> EmailMessage:
    """The email for ``alert``: text part and HTML alternative; To and From are the caller's."""
    keys = DATA_KEYS.get(alert.kind)
    if keys is None:
        raise ValueError(f"unknown alert kind {alert.kind!r}")
    data: dict[str, Any] = alert.data or {}
    values = {key: UNKNOWN if data.get(key) is None else data[key] for key in keys}
    values["endpoint_id"] = _endpoint_id(alert) or UNKNOWN
    console = public_url.rstrip("/") + "/console"
    links = [("Endpoint in the console", f"{console}/endpoints/{quote(str(values['endpoint_id']), safe='')}")]
    if data.get("event_id"):
        links.append(("Event in the console", f"{console}/events/{quote(str(data['event_id']), safe='')}"))
    # The kind's template exports ``subject``, ``summary`` and ``facts`` (plain text).
    wording: Any = _templates.get_template(f"email/{alert.kind}.txt").make_module(values)
    context = {
        **values,
        "kind": alert.kind,
        "subject": _one_line(f"{SUBJECT_PREFIX} {wording.subject}", MAX_SUBJECT_CHARS),
        "summary": str(wording.summary),
        "facts": wording.facts,
        "digest": digest,
        "links": links,
        "created_at": alert.created_at,
    }
    message = EmailMessage()
    message["Subject"] = context["subject"]
    message["Date"] = formatdate(usegmt=True)
    # Stable per alert row, so a crash-and-resend duplicate is recognisable as one.
    created = alert.created_at.strftime("%Y%m%d%H%M%S%f")
    message["Message-ID"] = f"<alert-{alert.id}-{created}@{urlsplit(public_url).hostname or 'localhost'}>"
    message["Auto-Submitted"] = "auto-generated"  # RFC 3834: auto-responders stay quiet
    message["X-Webhooks-Alert"] = alert.kind
    message.set_content(_templates.get_template("email/layout.txt").render(context))
    message.add_alternative(_templates.get_template("email/layout.html").render(context), subtype="html")
    return message


def _is_address(text: str) -> bool:
    name, address = parseaddr(text)
    # ASCII only: an internationalised address needs SMTPUTF8, which many relays lack.
    plain = text.isascii() and not any(c.isspace() for c in text)
    return plain and not name and address == text and "@" in address


def _claim_is_live(status: str | None, now: datetime) -> bool:
    """True while another sender's ``sending since …`` claim has not expired."""
    match = _CLAIM.match(status or "")
    if match is None:
        return False
    try:
        since = datetime.fromisoformat(match.group(1)).replace(tzinfo=None)
    except ValueError:
        return False
    return now - since < CLAIM_TTL


def _swap(alert_id: int, expected: str | None, status: str, done: bool) -> bool:
    """Set ``email_status`` (and ``emailed_at`` if ``done``) if the row is still as we saw it."""
    same = Alert.email_status.is_null() if expected is None else Alert.email_status == expected
    changes: dict[Any, Any] = {Alert.email_status: status}
    if done:
        changes[Alert.emailed_at] = utcnow()
    with write():
        updated: int = Alert.update(changes).where((Alert.id == alert_id) & Alert.emailed_at.is_null() & same).execute()
    return updated == 1


#: What handling one row came to: ``done`` is marked without sending, ``stop`` ends the pass.
Outcome = Literal["sent", "done", "skipped", "stop"]


def _mark_unsent(alert: Alert, why: str) -> Outcome:
    return "done" if _swap(alert.id, alert.email_status, why, done=True) else "skipped"


def _send_one(alert: Alert, config: SmtpConfig | None, public_url: str) -> Outcome:
    """Handle one pending alert: claim it, send it, mark it (or mark why not)."""
    now = utcnow()
    if _claim_is_live(alert.email_status, now):
        return "skipped"
    if config is None:
        return _mark_unsent(alert, "smtp not configured")
    address = recipient(alert)
    if address is None:
        return _mark_unsent(alert, "no contact address")
    if not _is_address(address):
        return _mark_unsent(alert, "not sent: invalid contact address")
    try:
        message = render(alert, digest_for(_endpoint_id(alert)), public_url)
        message["To"] = address
    except _RENDER_ERRORS as error:
        log.exception("alert email cannot be rendered alert_id=%s kind=%s", alert.id, alert.kind)
        return _mark_unsent(alert, _one_line(f"not sent: cannot render: {error}", MAX_STATUS_CHARS))
    claim = f"sending since {isoformat(now)} ({secrets.token_hex(4)})"
    if not _swap(alert.id, alert.email_status, claim, done=False):
        return "skipped"  # another sender got there first
    try:
        send(config, message, timeout=SEND_TIMEOUT)
    except MailError as error:
        detail = _one_line(str(error), MAX_STATUS_CHARS)
        if error.permanent or now - alert.created_at > GIVE_UP_AFTER:
            verdict = "not sent" if error.permanent else "gave up after 24 h"
            log.error("alert email %s alert_id=%s to=%s: %s", verdict, alert.id, address, detail)
            _swap(alert.id, claim, f"{verdict}: {detail}", done=True)
            return "done" if error.permanent else "stop"
        log.warning("alert email failed, will retry alert_id=%s to=%s: %s", alert.id, address, detail)
        _swap(alert.id, claim, f"will retry: {detail}", done=False)
        return "stop"
    if not _swap(alert.id, claim, f"sent to {address}", done=True):
        log.warning("alert email sent after its claim expired alert_id=%s", alert.id)
    log.info("alert email sent alert_id=%s kind=%s to=%s", alert.id, alert.kind, address)
    return "sent"


def send_pending(settings_smtp_url: str | None, public_url: str, limit: int = 100) -> int:
    """Email up to ``limit`` unsent alerts, oldest first; returns how many were sent.

    Without ``SMTP_URL`` the alerts are marked ``smtp not configured`` (they do not pile up).
    A temporary SMTP failure ends the pass; the row is retried next pass, for 24 h. A refused
    recipient (5xx) is marked and the pass goes on. Raises ValueError for an invalid
    ``SMTP_URL`` (better: check it once at start with ``SmtpConfig.parse``).

    Exactly once among live senders, at least once across crashes. A sender claims a row by
    compare-and-swap on ``email_status`` (``sending since …``) before it talks SMTP, and marks
    it afterwards, each in its own short transaction (none is open during SMTP). Any number
    of clocks may run this concurrently. A claim older than ``CLAIM_TTL`` is from a sender
    that died and may be taken over: if it died after the server accepted the message but
    before its mark committed, the alert goes out twice, with the same ``Message-ID`` (many
    clients collapse it). A rare duplicate beats an offline endpoint nobody hears about.
    """
    config = SmtpConfig.parse(settings_smtp_url) if settings_smtp_url else None
    sent = 0
    with connection():
        pending = list(
            Alert.select().where(Alert.emailed_at.is_null()).order_by(Alert.created_at, Alert.id).limit(limit)
        )
        for alert in pending:
            outcome = _send_one(alert, config, public_url)
            sent += outcome == "sent"
            if outcome == "stop":
                break
    return sent
