"""Tables of the support console: staff accounts, the audit log of operator actions, replay jobs."""

from __future__ import annotations

import peewee

from webhooks.storage.db import database
from webhooks.storage.fields import JSONField
from webhooks.storage.timeutil import utcnow

#: Roles a staff account may have; operators may also change things.
ROLES = ("viewer", "operator")


class ConsoleModel(peewee.Model):
    class Meta:
        database = database
        legacy_table_names = False


class StaffUser(ConsoleModel):
    """A support person: email, werkzeug password hash and role."""

    id = peewee.AutoField()
    email = peewee.CharField(max_length=320, unique=True)
    password_hash = peewee.CharField(max_length=255)
    role = peewee.CharField(max_length=16, default="viewer")
    active = peewee.BooleanField(default=True)
    created_at = peewee.DateTimeField(default=utcnow)
    last_login_at = peewee.DateTimeField(null=True)

    @property
    def is_operator(self) -> bool:
        return self.role == "operator"


class AuditEntry(ConsoleModel):
    """One operator action: who (``actor``, an email or ``cli:<user>``), what, on which object, when."""

    id = peewee.AutoField()
    actor = peewee.CharField(max_length=320)
    #: ``resend``, ``replay``, ``replay_all``, ``recover``, ``probe`` (try now), ``disable``, ``enable``.
    action = peewee.CharField(max_length=32)
    #: ``delivery``, ``endpoint`` or ``replay_job``, and its id.
    target_type = peewee.CharField(max_length=32)
    target_id = peewee.CharField(max_length=64)
    #: The event the action concerns, so the event page can list what was done to it.
    event_id = peewee.CharField(max_length=40, null=True)
    detail = JSONField(default=dict)
    created_at = peewee.DateTimeField(default=utcnow)

    class Meta:
        indexes = ((("target_type", "target_id"), False), (("event_id",), False))


class ReplayJob(ConsoleModel):
    """A bulk replay of failed deliveries, run in the background; progress lives here.

    Resumable: deliveries are taken in id order after ``cursor`` up to ``upto_id`` (the
    newest that matched when the job was made), so a restarted job carries on where it stopped.
    """

    id = peewee.AutoField()
    actor = peewee.CharField(max_length=320)
    #: ``{"tenant", "endpoint", "event_type", "since"}`` as given (None: any).
    filters = JSONField(default=dict)
    #: ``queued`` -> ``running`` -> ``done`` | ``failed`` (resumable, with ``error``).
    status = peewee.CharField(max_length=16, default="queued")
    total = peewee.IntegerField(default=0)
    done = peewee.IntegerField(default=0)
    upto_id = peewee.CharField(max_length=40, null=True)
    cursor = peewee.CharField(max_length=40, null=True)
    error = peewee.TextField(null=True)
    #: Who runs it now (a random token) and when it last reported; a stale heartbeat means it died.
    runner = peewee.CharField(max_length=32, null=True)
    heartbeat_at = peewee.DateTimeField(null=True)
    created_at = peewee.DateTimeField(default=utcnow)
    finished_at = peewee.DateTimeField(null=True)

    @property
    def percent(self) -> int:
        return 100 if not self.total else min(100, int(self.done * 100 / self.total))


class LoginThrottle(ConsoleModel):
    """Login attempts counted for one key (an account, a client address) in a fixed window
    (``webhooks.console.login_throttle``): a row shared by every web process."""

    #: ``account:`` or ``address:`` and the SHA-256 of the email or address (no addresses kept in the clear).
    key = peewee.CharField(primary_key=True, max_length=80)
    attempts = peewee.IntegerField()
    window_started_at = peewee.DateTimeField()

    class Meta:
        indexes = ((("window_started_at",), False),)


#: Creation order (parents first); tests truncate these with ``webhooks.storage.models.ALL_MODELS``.
CONSOLE_MODELS: tuple[type[ConsoleModel], ...] = (StaffUser, AuditEntry, ReplayJob, LoginThrottle)
