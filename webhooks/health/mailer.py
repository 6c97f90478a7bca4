"""Send one email through the SMTP server named by ``SMTP_URL`` (smtplib; plain, STARTTLS or TLS).
The password is kept out of ``repr``/``str`` and scrubbed from every error raised here.
"""

from __future__ import annotations

import ipaddress
import smtplib
import ssl
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import parseaddr
from typing import Literal
from urllib.parse import parse_qs, quote, unquote, urlsplit

from webhooks.errors import WebhooksError
from webhooks.secrecy import mask

#: ``plain``: no TLS (local relays, tests); ``starttls``: upgrade on port 587; ``tls``: implicit TLS.
Security = Literal["plain", "starttls", "tls"]

#: Port used when the URL names none.
DEFAULT_PORTS: dict[Security, int] = {"plain": 25, "starttls": 587, "tls": 465}

#: Query parameters ``SMTP_URL`` understands; anything else is a typo worth failing on.
QUERY_PARAMS = frozenset({"from", "starttls"})

#: Spellings of a boolean query value.
_BOOLEANS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}



class MailError(WebhooksError):
    """Sending failed; the message never contains the password.

    ``permanent`` is True when retrying this message cannot help (every recipient was
    refused with a 5xx); False for everything that may pass later (server down, 4xx, auth).
    """

    def __init__(self, message: str, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


@dataclass(frozen=True)
class SmtpConfig:
    host: str
    port: int
    security: Security = "plain"
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    #: The ``From`` header: ``from=`` of the URL, else ``webhooks@<SMTP host>``.
    sender: str = ""

    @classmethod
    def parse(cls, url: str) -> SmtpConfig:
        """``smtp://user:pass@host:port``, ``smtps://…`` (implicit TLS), ``smtp://…?starttls=1``.

        User and password are percent-decoded; ``from=`` sets the sender (``Name <a@b>`` allowed).
        Raises ValueError naming the problem (never echoing the password).
        """
        try:
            parts = urlsplit(url.strip())
        except ValueError:
            raise ValueError("SMTP_URL: not a URL (smtp://user:pass@host:port)") from None
        try:
            port = parts.port
        except ValueError:
            port = 0
        if port == 0:
            raise ValueError("SMTP_URL: the port is not a number from 1 to 65535")
        if parts.scheme not in ("smtp", "smtps"):
            raise ValueError(f"SMTP_URL: scheme must be smtp or smtps, not {parts.scheme or 'missing'!r}")
        if not parts.hostname:
            raise ValueError("SMTP_URL: the host is missing")
        if parts.path not in ("", "/"):
            raise ValueError("SMTP_URL: a path is not allowed (use smtp://user:pass@host:port?from=…)")
        query = parse_qs(parts.query, keep_blank_values=True)
        unknown = sorted(set(query) - QUERY_PARAMS)
        if unknown:
            raise ValueError(f"SMTP_URL: unknown query parameter(s) {', '.join(unknown)}; known: from, starttls")
        starttls = _boolean(query.get("starttls", ["0"])[-1])
        if starttls and parts.scheme == "smtps":
            raise ValueError("SMTP_URL: starttls=1 contradicts smtps:// (implicit TLS); use one of them")
        security: Security = "tls" if parts.scheme == "smtps" else "starttls" if starttls else "plain"
        username = unquote(parts.username) if parts.username else None
        password = unquote(parts.password) if parts.password is not None else None
        if (username is None) != (password is None):
            raise ValueError("SMTP_URL: give both a user name and a password, or neither")
        sender = query["from"][-1].strip() if "from" in query else _default_sender(parts.hostname)
        if "@" not in parseaddr(sender)[1] or any(c in sender for c in "\r\n"):
            raise ValueError(f"SMTP_URL: from={sender!r} is not an email address")
        return cls(parts.hostname, port or DEFAULT_PORTS[security], security, username, password, sender)

    def __str__(self) -> str:
        """The URL without the password, for logs: ``smtps://user@host:465``."""
        scheme = "smtps" if self.security == "tls" else "smtp"
        user = f"{quote(self.username, safe='')}@" if self.username else ""
        suffix = "?starttls=1" if self.security == "starttls" else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{user}{host}:{self.port}{suffix}"

    def redact(self, text: str) -> str:
        """``text`` with the password (raw or percent-encoded) replaced by ``***``."""
        return mask(text, self.password)


def _boolean(value: str) -> bool:
    try:
        return _BOOLEANS[value.strip().lower()]
    except KeyError:
        raise ValueError(f"SMTP_URL: starttls={value!r} is not a boolean (use 1 or 0)") from None


def _default_sender(hostname: str) -> str:
    try:
        return f"webhooks@[{ipaddress.ip_address(hostname)}]"  # an address literal needs brackets
    except ValueError:
        return f"webhooks@{hostname}"


def _is_permanent(error: Exception) -> bool:
    """Every recipient refused with a 5xx: this message will never go through."""
    if isinstance(error, smtplib.SMTPRecipientsRefused):
        return bool(error.recipients) and all(code >= 500 for code, _ in error.recipients.values())
    return False


def send(config: SmtpConfig, message: EmailMessage, timeout: float = 10) -> None:
    """Send ``message`` (``From`` set from ``config`` if missing); raise MailError on any failure.

    ``timeout`` bounds each network operation (connect, each SMTP command), not the whole send.
    """
    if message["From"] is None:
        message["From"] = config.sender
    context = ssl.create_default_context()
    try:
        smtp: smtplib.SMTP
        if config.security == "tls":
            smtp = smtplib.SMTP_SSL(config.host, config.port, timeout=timeout, context=context)
        else:
            smtp = smtplib.SMTP(config.host, config.port, timeout=timeout)
        with smtp:
            if config.security == "starttls":
                smtp.starttls(context=context)
            if config.username is not None and config.password is not None:
                smtp.login(config.username, config.password)
            smtp.send_message(message)
    except (smtplib.SMTPException, OSError) as error:
        # ``from None``: the original exception may carry server text echoing credentials.
        detail = config.redact(f"{type(error).__name__}: {error}")
        raise MailError(f"{detail} (via {config})", permanent=_is_permanent(error)) from None
