"""The audit log: every operator action (console or command line) with who, what and when."""

from __future__ import annotations

import getpass
from typing import Any

import peewee

from webhooks.actions import Requester
from webhooks.console.models import AuditEntry
from webhooks.storage.db import retrying


@retrying
def record(
    actor: str, action: str, target_type: str, target_id: str, *, event_id: str | None = None, **detail: Any
) -> AuditEntry:
    """Write one entry; ``detail`` holds what the action needs to be understood later (counts, reasons)."""
    return AuditEntry.create(
        actor=actor, action=action, target_type=target_type, target_id=target_id, event_id=event_id, detail=detail
    )


def cli_actor() -> str:
    """Who runs a ``flask`` command: ``cli:<login name>``."""
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli:unknown"


def cli_requester() -> Requester:
    """Who asks, for resends made from the command line: the login name (as in ``cli_actor``)."""
    return requester_of(cli_actor())


def requester_of(actor: str) -> Requester:
    """The requester of an audit actor: ``cli:<login>`` is the command line, anything else a staff email."""
    kind, _, name = actor.partition(":")
    return Requester("cli", name) if kind == "cli" and name else Requester("staff", actor)


def entries(*conditions: peewee.Expression) -> peewee.ModelSelect:
    """Entries matching every condition (newest first when paged by id)."""
    query = AuditEntry.select()
    for condition in conditions:
        query = query.where(condition)
    return query


def about(target_type: str, target_id: str, limit: int = 20) -> list[AuditEntry]:
    """The latest entries about one object, newest first."""
    condition = (AuditEntry.target_type == target_type) & (AuditEntry.target_id == target_id)
    if target_type == "event":
        condition = AuditEntry.event_id == target_id
    return list(entries(condition).order_by(AuditEntry.id.desc()).limit(limit))
