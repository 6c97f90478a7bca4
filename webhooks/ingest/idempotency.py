"""Idempotency keys: a key names the first answer to a request for 24 hours.

The rules, the same wherever a key is taken: the same key with the same request (its
``fingerprint``) answers what the first one did and acts no more; with a different request
it is a conflict (409); a key older than ``IDEMPOTENCY_TTL`` is forgotten (``expired``) and
may be used afresh. Ingestion's keys name one event (a unique ``(tenant, key)``, below);
the Svix API's keys name a whole answer (``webhooks.svix.idempotency``). Within one batch, a
later item that repeats an earlier item's key is treated as if the items had been sent one
after the other.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Sequence

from webhooks.errors import Refused
from webhooks.storage.models import IdempotencyKey

#: How long an idempotency key is remembered.
IDEMPOTENCY_TTL = timedelta(hours=24)


class IdempotencyConflict(Refused):
    """A key was used before with a different request; ``indexes`` are the batch items concerned."""

    def __init__(self, conflicts: Sequence[tuple[int, str]]) -> None:
        self.conflicts = sorted(conflicts)
        index, key = self.conflicts[0]
        super().__init__(f"idempotency key {key!r} was already used with a different request")

    @property
    def indexes(self) -> list[int]:
        return [index for index, _ in self.conflicts]


def fingerprint(request: Any) -> str:
    """SHA-256 of a request's canonical JSON, to tell a retry from a different request with the same key."""
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def request_hash(event_type: str, payload: dict[str, Any]) -> str:
    """Fingerprint of an event's request (its type and payload)."""
    return fingerprint({"event_type": event_type, "payload": payload})


def expired(created_at: datetime, now: datetime) -> bool:
    """Is a key made at ``created_at`` forgotten by ``now``?"""
    return created_at < now - IDEMPOTENCY_TTL


def repeats_within(keys: Sequence[str | None], digests: Sequence[str | None]) -> dict[int, int]:
    """Items that repeat the key of an earlier item of the same batch: ``{later index: first index}``.

    Raises ``IdempotencyConflict`` naming every repeat whose request differs from the first one.
    """
    first: dict[str, int] = {}
    repeats: dict[int, int] = {}
    conflicts = []
    for index, key in enumerate(keys):
        if key is None:
            continue
        earlier = first.setdefault(key, index)
        if earlier == index:
            continue
        if digests[earlier] != digests[index]:
            conflicts.append((index, key))
        repeats[index] = earlier
    if conflicts:
        raise IdempotencyConflict(conflicts)
    return repeats


@dataclass
class OnFile:
    """What the keys on file say about the items about to be stored."""

    #: item index -> the id of the event its key already names.
    replays: dict[int, str] = field(default_factory=dict)
    #: Keys older than ``IDEMPOTENCY_TTL``: deleted in the storing transaction, then used afresh.
    expired: list[str] = field(default_factory=list)


def look_up(tenant_id: str, keyed: dict[str, tuple[int, str]], now: datetime) -> OnFile:
    """Check the keys of ``keyed`` (``key -> (item index, request hash)``) against those on file.

    Raises ``IdempotencyConflict`` naming every item whose key names a different request.
    """
    found = OnFile()
    if not keyed:
        return found
    rows = (
        IdempotencyKey.select(IdempotencyKey.key, IdempotencyKey.event, IdempotencyKey.request_hash,
                              IdempotencyKey.created_at)
        .where((IdempotencyKey.tenant == tenant_id) & IdempotencyKey.key.in_(list(keyed)))
    )
    conflicts = []
    for row in rows:
        index, digest = keyed[row.key]
        if expired(row.created_at, now):
            found.expired.append(row.key)
        elif row.request_hash != digest:
            conflicts.append((index, row.key))
        else:
            found.replays[index] = row.event_id
    if conflicts:
        raise IdempotencyConflict(conflicts)
    return found
