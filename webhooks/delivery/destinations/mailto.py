"""The email kind: ``mailto:ops@example.com[,oncall@example.com…]``, sent through the operator's ``SMTP_URL``.

Each delivery is one email to every address of the URL (``mail_message``): the subject, text
and HTML the event type's templates render (``catalog.mail_templates``; the default rendering
where it has none), the signed body attached and the Standard Webhooks headers as mail headers.
It goes through the SMTP server of ``SMTP_URL`` (the one the alert emails use,
``health.mailer.SmtpConfig``), with aiosmtplib on the worker's loop, one session per email.

The SMTP reply to the message is the attempt's response (``250 …``). What the server says
decides what follows: a 4xx (to the sender, a recipient or the message) is ``smtp_deferred``
and climbs the ladder; a 5xx to the sender, the recipients or the message is
``smtp_rejected``, which fails the delivery at once (``http_result.FINAL_ERROR_CLASSES``:
another attempt cannot help); a 5xx to the session itself (greeting, EHLO, STARTTLS) is the
server's or the operator's set-up (``refused``, retried), as is a refused login (``auth``);
connection failures and the deadline are ``connection``, ``tls`` and ``timeout``. A worker
holds at most ``MAX_SESSIONS`` SMTP sessions at once. When some
addresses are refused for good and others accepted, the email goes to those accepted and the
refused ones are named in the response; when any is refused for now (4xx), nothing is sent
and the whole email is tried again, so no address gets it twice.

The SSRF guard is not applied here: the customer chooses only the addresses, whose domains
are never connected to; the SMTP server is the operator's own choice (``SMTP_URL``), like
the database's or the broker's.
"""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass

import aiosmtplib

from webhooks.catalog import store
from webhooks.catalog.mail_templates import MailTemplates, render
from webhooks.delivery.batcher import database_work
from webhooks.delivery.destinations.base import Kind, Parcel, failure, one_line
from webhooks.delivery.destinations.mail_message import compose, event_values, sender_address
from webhooks.delivery.http_result import HttpResult
from webhooks.health.mailer import SmtpConfig

log = logging.getLogger(__name__)

#: The most addresses one endpoint may name.
MAX_ADDRESSES = 10
#: SMTP sessions one worker holds at once, for all its email endpoints together: a mail server
#: bounds each client's connections (Postfix: 50) and defers (421) what comes beyond. Waiting
#: for a session counts against the delivery's deadline.
MAX_SESSIONS = 20
#: A local part as accepted: dot-atoms of characters that need no quoting in an address nor
#: percent-encoding in a URL (no ``% / ? #`` and no ``,``, the separator).
LOCAL_PART = r"[A-Za-z0-9!$&'*+=^_`{|}~-]{1,64}(?:\.[A-Za-z0-9!$&'*+=^_`{|}~-]{1,64}){0,7}"
#: A domain name as accepted: at least two labels, the last one starting with a letter (no address literals).
DOMAIN = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.){1,8}[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
ADDRESS = f"{LOCAL_PART}@{DOMAIN}"
#: The ``mailto:`` URLs the API accepts, exactly (``MailTarget.parse`` reads every one of them:
#: tests/delivery/test_mailto.py checks it with generated strings): one address or several, comma-separated.
PATTERN = rf"^[Mm][Aa][Ii][Ll][Tt][Oo]:{ADDRESS}(?:,{ADDRESS}){{0,{MAX_ADDRESSES - 1}}}$(?!\n)"

_ADDRESS = re.compile(ADDRESS)


@dataclass(frozen=True)
class MailTarget:
    """A ``mailto:`` URL, read: its addresses, in the order given, each once (whatever its case)."""

    addresses: tuple[str, ...]

    @classmethod
    def parse(cls, url: str) -> MailTarget:
        """The URL read, or ValueError naming the address that is wrong."""
        scheme, colon, rest = url.partition(":")
        if scheme.lower() != "mailto" or not colon:
            raise ValueError(f"not a mailto: URL: {url[:40]!r}")
        if "?" in rest:
            raise ValueError("a mailto: URL takes no ?subject= or other fields: the subject comes from the event "
                             "type's email_subject template")
        if not rest:
            raise ValueError("a mailto: URL names at least one address: mailto:ops@example.com")
        addresses = rest.split(",")
        if len(addresses) > MAX_ADDRESSES:
            raise ValueError(f"a mailto: URL names at most {MAX_ADDRESSES} addresses, not {len(addresses)}")
        for address in addresses:
            if not _ADDRESS.fullmatch(address):
                raise ValueError(f"{address!r} is not an email address a mailto: URL takes (name@domain.example, "
                                 "comma-separated, no spaces, no percent-encoding)")
        # An address named twice gets the email once (a pattern cannot say "each once").
        unique: dict[str, str] = {}
        for address in addresses:
            unique.setdefault(address.lower(), address)
        return cls(tuple(unique.values()))


def split(url: str) -> tuple[str, str, int]:
    """``("mailto", "", 0)``: the URL names no host this service connects to (``Kind.reaches_host``)."""
    MailTarget.parse(url)
    return "mailto", "", 0


KIND = Kind(name="Email", schemes=("mailto",), pattern=PATTERN, split=split, reaches_host=False)


class CatalogTemplates:
    """This worker's copy of the catalog's email templates, read again every ``ttl`` seconds (on a thread)."""

    def __init__(self, ttl: float, read: Callable[[], dict[str, MailTemplates]] = store.email_templates) -> None:
        self._ttl, self._read = ttl, read
        self._copy: dict[str, MailTemplates] | None = None
        self._read_at = float("-inf")
        self._reading: asyncio.Future[dict[str, MailTemplates]] | None = None

    async def of(self, event_type: str) -> MailTemplates | None:
        """The type's templates (None: it has none); raises what reading the catalog raised when there is no copy yet."""
        if time.monotonic() - self._read_at >= self._ttl:
            await self._refresh()
        assert self._copy is not None
        return self._copy.get(event_type)

    async def _refresh(self) -> None:
        if self._reading is None:  # one read for every delivery that finds the copy stale
            self._reading = asyncio.ensure_future(asyncio.to_thread(database_work, self._read))
        reading = self._reading
        try:
            self._copy = await asyncio.shield(reading)
        except Exception:
            if self._copy is None:
                raise
            log.warning("could not read the email templates again; the copy of %.0f s ago is used",
                        time.monotonic() - self._read_at, exc_info=True)
        finally:
            if self._reading is reading:
                self._reading = None
        self._read_at = time.monotonic()


class Email:
    """Emails each parcel to the addresses of its URL through ``SMTP_URL``."""

    kind = KIND

    def __init__(self, *, timeout: float, smtp_url: str | None, templates: CatalogTemplates) -> None:
        self._timeout = timeout
        self._templates = templates
        self._config: SmtpConfig | None = None
        self._config_problem: str | None = None
        if smtp_url is None:
            self._config_problem = "this service sends no email: its operator has not set SMTP_URL"
        else:
            try:
                self._config = SmtpConfig.parse(smtp_url)
            except ValueError as error:  # the other kinds still deliver; each email fails saying why
                self._config_problem = str(error)
                log.error("email endpoints get nothing until SMTP_URL is fixed: %s", error)
        #: This host's name as EHLO gives it, looked up (off the loop) by the first session.
        self._local_hostname: str | None = None
        self._sessions = asyncio.Semaphore(MAX_SESSIONS)

    async def deliver(self, url: str, parcel: Parcel) -> HttpResult:
        started = time.monotonic()
        try:
            target = MailTarget.parse(url)
        except ValueError as error:
            return failure("protocol", f"invalid URL: {error}")
        if self._config is None:
            return failure("config", one_line(self._config_problem or "SMTP_URL is not usable"))
        try:
            templates = await self._templates.of(parcel.event_type)
        except Exception as error:  # noqa: BLE001 - the database: the ladder tries again
            return failure("catalog", one_line(f"could not read the event type's email templates: {error}"))
        rendered = render(templates, event_values(parcel))
        if rendered.problems:
            log.warning("event=%s type=%s: %s; its default rendering was sent", parcel.event_id, parcel.event_type,
                        "; ".join(rendered.problems))
        message = compose(parcel, rendered, self._config.sender, target.addresses).as_bytes()
        try:
            async with asyncio.timeout(self._timeout), self._sessions:
                reply = await self._send(self._config, target.addresses, message)
        except Exception as exc:
            described = _describe(exc, self._config, self._timeout)
            if described is None:
                raise
            error_class, error, answer = described
            return HttpResult(status_code=None, headers={}, body=self._config.redact(answer).encode(),
                              duration_ms=(time.monotonic() - started) * 1000.0, error_class=error_class,
                              error=one_line(self._config.redact(error)))
        if rendered.problems:
            reply += f" (the default rendering was sent: {'; '.join(rendered.problems)})"
        return HttpResult(status_code=None, headers={}, body=self._config.redact(reply).encode(),
                          duration_ms=(time.monotonic() - started) * 1000.0, error_class=None, error=None)

    async def close(self) -> None:
        """Nothing is kept between emails."""

    async def _send(self, config: SmtpConfig, recipients: tuple[str, ...], message: bytes) -> str:
        """One SMTP session: the reply to the message, with the addresses refused for good; raises otherwise."""
        smtp = aiosmtplib.SMTP(
            hostname=config.host, port=config.port, timeout=self._timeout, local_hostname=self._local_hostname,
            use_tls=config.security == "tls", start_tls=config.security == "starttls",
            tls_context=ssl.create_default_context(), username=config.username, password=config.password,
        )
        try:
            await smtp.connect()
            self._local_hostname = smtp.local_hostname
            await smtp.mail(sender_address(config.sender))
            refused: dict[str, aiosmtplib.SMTPRecipientRefused] = {}
            for recipient in recipients:
                try:
                    await smtp.rcpt(recipient)
                except aiosmtplib.SMTPRecipientRefused as error:
                    refused[recipient] = error
            if any(error.code < 500 for error in refused.values()) or len(refused) == len(recipients):
                # Some address only for now, or every one for good: nobody gets it this time.
                raise _Refused(refused)
            response = await smtp.data(message)
            answer = f"{response.code} {response.message}"
            if refused:
                answer += "; refused: " + ", ".join(f"{address} ({error.code} {error.message})"
                                                    for address, error in refused.items())
            try:
                await smtp.quit()
            except (aiosmtplib.SMTPException, OSError):
                pass  # the message was taken: a bad goodbye changes nothing
            return answer
        finally:
            smtp.close()


class _Refused(Exception):
    """The server refused recipients: for now (any 4xx) or every one for good (all 5xx)."""

    def __init__(self, refused: dict[str, aiosmtplib.SMTPRecipientRefused]) -> None:
        self.refused = refused
        super().__init__("; ".join(f"RCPT TO <{address}>: {error.code} {error.message}"
                                   for address, error in refused.items()))

    @property
    def code(self) -> int:
        """The reply that decides: a 4xx if there is one (worth trying again), else the first 5xx."""
        codes = [error.code for error in self.refused.values()]
        return next((code for code in codes if code < 500), codes[0])


def _describe(exc: Exception, config: SmtpConfig, timeout: float) -> tuple[str, str, str] | None:
    """``(error_class, message, SMTP reply)`` for a problem of the mail server, or None (a bug: re-raised)."""
    where = f"mail server {config.host}:{config.port}"
    if isinstance(exc, _Refused):
        return _by_code(exc.code, f"{where} refused {exc}", str(exc), message_stage=True)
    if isinstance(exc, aiosmtplib.SMTPAuthenticationError):
        return "auth", f"{where} refused SMTP_URL's login: {exc.code} {exc.message}", f"{exc.code} {exc.message}"
    if isinstance(exc, aiosmtplib.SMTPSenderRefused):
        return _by_code(exc.code, f"{where} refused MAIL FROM <{exc.sender}>: {exc.code} {exc.message}",
                        f"{exc.code} {exc.message}", message_stage=True)
    if isinstance(exc, aiosmtplib.SMTPDataError):
        return _by_code(exc.code, f"{where} refused the message: {exc.code} {exc.message}",
                        f"{exc.code} {exc.message}", message_stage=True)
    if isinstance(exc, aiosmtplib.SMTPResponseException):  # the greeting, EHLO, STARTTLS
        return _by_code(exc.code, f"{where} refused the session: {exc.code} {exc.message}",
                        f"{exc.code} {exc.message}", message_stage=False)
    if isinstance(exc, aiosmtplib.SMTPNotSupported):
        return "tls", f"{where}: {exc} (SMTP_URL asks for STARTTLS)", ""
    if isinstance(exc, (TimeoutError, aiosmtplib.SMTPTimeoutError)):
        return "timeout", f"total deadline of {timeout:g} s exceeded sending through {where}", ""
    cause = exc.__cause__ if isinstance(exc, aiosmtplib.SMTPConnectError) and exc.__cause__ else exc
    if isinstance(cause, ssl.SSLError):
        return "tls", f"TLS error with {where}: {cause}", ""
    if isinstance(exc, (aiosmtplib.SMTPConnectError, aiosmtplib.SMTPServerDisconnected, OSError)):
        return "connection", f"cannot connect to {where}: {exc}", ""
    if isinstance(exc, aiosmtplib.SMTPException):
        return "protocol", f"{where}: {type(exc).__name__}: {exc}", ""
    return None


def _by_code(code: int, message: str, answer: str, *, message_stage: bool) -> tuple[str, str, str]:
    """A reply's class: 4xx deferred (retried); 5xx to the message refused for good, to the session ``refused`` (retried)."""
    if code < 500:
        return "smtp_deferred", message, answer
    return ("smtp_rejected" if message_stage else "refused"), message, answer
