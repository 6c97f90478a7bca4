"""The email of one delivery: what the event type's templates render, and the signed webhook for a program.

One message to every address of the endpoint: ``multipart/mixed`` of the rendered text and
HTML (``multipart/alternative``) and the exact body bytes signed as an ``application/json``
attachment (base64, so they arrive byte for byte). The Standard Webhooks headers travel as
mail headers (``Webhook-Id``, ``Webhook-Timestamp``, ``Webhook-Signature``): a program
reading the mailbox verifies the attachment with them as it would an HTTP request.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from email import policy
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid, parseaddr
from typing import Any

from webhooks.catalog.mail_templates import RenderedMail, context
from webhooks.delivery.destinations.base import Parcel

#: The Standard Webhooks headers a message carries, as the mail spells them.
SIGNATURE_HEADERS = {"webhook-id": "Webhook-Id", "webhook-timestamp": "Webhook-Timestamp",
                     "webhook-signature": "Webhook-Signature"}
#: Every part 7-bit (non-ASCII text quoted-printable or base64): a server without 8BITMIME takes
#: it as it is (aiosmtplib sends the lines with SMTP's CRLF).
MAIL_POLICY = policy.default.clone(cte_type="7bit")


def event_values(parcel: Parcel) -> dict[str, Any]:
    """What the templates see of the parcel's event: its id, type, timestamp and payload (from the signed body)."""
    body = json.loads(parcel.request.body)
    return context(parcel.event_id, parcel.event_type, body["timestamp"], body["data"])


def sender_address(sender: str) -> str:
    """The bare address of ``SMTP_URL``'s ``from=`` (``Name <a@b>`` allowed), for ``MAIL FROM``."""
    return parseaddr(sender)[1]


def compose(parcel: Parcel, rendered: RenderedMail, sender: str, recipients: tuple[str, ...]) -> EmailMessage:
    """The message: rendered parts, the signed body attached, the signature headers."""
    message = EmailMessage(policy=MAIL_POLICY)
    message["From"] = sender
    message["To"] = ", ".join(recipients)
    message["Subject"] = rendered.subject
    message["Date"] = format_datetime(datetime.now(timezone.utc))
    # Passing the domain keeps make_msgid from looking up this host's name (a blocking DNS call).
    message["Message-ID"] = make_msgid(domain=sender_address(sender).rpartition("@")[2] or "webhooks.invalid")
    message["Auto-Submitted"] = "auto-generated"  # RFC 3834: no vacation replies
    for name, mail_name in SIGNATURE_HEADERS.items():
        message[mail_name] = parcel.request.headers[name]
    message.set_content(rendered.text)
    message.add_alternative(rendered.html, subtype="html")
    message.add_attachment(parcel.request.body, maintype="application", subtype="json",
                           filename=f"{parcel.event_id}.json")
    return message
