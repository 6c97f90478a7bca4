"""A real SMTP server on 127.0.0.1 for tests (aiosmtpd), keeping what it accepts."""

from __future__ import annotations

import asyncio
import socket
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from typing import Any
from urllib.parse import quote

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

USER = "alerts"
#: Characters that need percent-encoding in a URL, so both spellings must stay hidden.
PASSWORD = "hunter2-p@ss/w:rd"


class Inbox:
    """aiosmtpd handler that keeps what it accepts; can refuse recipients, answer the message
    with replies given in advance, or answer slowly."""

    def __init__(self) -> None:
        self.messages: list[tuple[list[str], EmailMessage]] = []
        self.logins: list[str] = []
        self.refused: set[str] = set()
        #: Recipients refused for now (``450``): tried again later.
        self.deferred: set[str] = set()
        #: Replies to the next messages, in order (e.g. ``451 4.3.0 try later``); then ``250``.
        self.data_replies: list[str] = []
        #: The replies given to each message, in order (the scripted ones and the ``250``s).
        self.answered: list[str] = []
        self.delay = 0.0
        #: Messages being received now, and the most at once so far.
        self.receiving = 0
        self.most_receiving = 0

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str, options: Any) -> str:
        if address in self.refused:
            return "550 5.1.1 mailbox unavailable"
        if address in self.deferred:
            return "450 4.2.1 mailbox busy, try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.receiving += 1
        self.most_receiving = max(self.most_receiving, self.receiving)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.receiving -= 1
        if self.data_replies:
            self.answered.append(self.data_replies.pop(0))
            return self.answered[-1]
        message = BytesParser(policy=policy.default).parsebytes(envelope.content)
        self.messages.append((list(envelope.rcpt_tos), message))
        self.answered.append("250 Message accepted for delivery")
        return self.answered[-1]

    def authenticate(self, server: Any, session: Any, envelope: Any, mechanism: str, data: Any) -> AuthResult:
        assert isinstance(data, LoginPassword)
        login, password = data.login.decode(), data.password.decode()
        if (login, password) == (USER, PASSWORD):
            self.logins.append(login)
            return AuthResult(success=True)
        # A careless server that echoes the password it got: it must not reach our logs.
        return AuthResult(success=False, handled=False, message=f"535 5.7.8 bad credentials {password}")


class SmtpServer:
    """A real SMTP server on 127.0.0.1 that can be stopped and started again on the same port."""

    def __init__(self) -> None:
        self.inbox = Inbox()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.controller: Controller | None = None

    def start(self) -> None:
        self.controller = Controller(
            self.inbox, hostname="127.0.0.1", port=self.port,
            authenticator=self.inbox.authenticate, auth_require_tls=False,
        )
        self.controller.start()

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None

    def url(self, password: str = PASSWORD) -> str:
        return f"smtp://{USER}:{quote(password, safe='')}@127.0.0.1:{self.port}?from=alerts%40example.com"

    def sent_to(self, address: str) -> list[EmailMessage]:
        return [message for recipients, message in self.inbox.messages if address in recipients]
