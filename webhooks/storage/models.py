"""Tables: tenants and their API keys, endpoints, events, deliveries and attempts.

The database is the source of truth for delivery state; RabbitMQ only moves work.
Timestamps are naive UTC. The column types (JSON as text, sealed secrets and destination URLs
that carry a password) are in ``webhooks.storage.fields``.
"""

from __future__ import annotations

import peewee

from webhooks.storage.db import database
from webhooks.storage.fields import JSONField, PayloadField, SealedField, SealedUrlField
from webhooks.storage.timeutil import utcnow
from webhooks.storage.statuses import DeliveryStatus


class BaseModel(peewee.Model):
    class Meta:
        database = database
        legacy_table_names = False


class Tenant(BaseModel):
    """A platform's customer: its own endpoints, events, keys and history.

    ``name`` and ``uid`` are unique among live tenants (migration 0015's partial indexes):
    a deleted tenant frees both at once, and the clock purges its rows later
    (``webhooks.tenants``).
    """

    id = peewee.CharField(primary_key=True, max_length=40)
    name = peewee.CharField(max_length=200)
    #: The platform's own id for its customer, accepted wherever a tenant id is.
    uid = peewee.CharField(max_length=64, null=True)
    metadata = JSONField(default=dict)
    #: Where alerts about the tenant's endpoints go when an endpoint has no contact of its own.
    contact_email = peewee.CharField(max_length=320, null=True)
    #: Last ``seq`` handed out; bumped inside each event's transaction (cursor = commit order).
    event_seq = peewee.BigIntegerField(default=0)
    created_at = peewee.DateTimeField(default=utcnow)
    #: Token bucket of ``INGEST_RATE_LIMIT``, refilled on use; None means full.
    ingest_tokens = peewee.FloatField(null=True)
    ingest_updated_at = peewee.DateTimeField(null=True)
    #: Soft delete: its keys stop, it takes no events, its unfinished deliveries are cancelled.
    deleted_at = peewee.DateTimeField(null=True)


class ApiKey(BaseModel):
    """A tenant's key ``<id>.<secret>``, or the platform's (``tenant`` is None): looked up by id,
    SHA-256 of the secret stored. One mechanism for both owners (``webhooks.ingest.auth_keys``).

    A tenant may hold several, each with a name. A key replaced by a rotation keeps working
    until ``expires_at`` (the overlap); a revoked one stops at once (within the key cache's lifetime).
    """

    id = peewee.CharField(primary_key=True, max_length=40)
    #: None: a platform key (``/v1/tenants…``), not a tenant's.
    tenant = peewee.ForeignKeyField(Tenant, backref="api_keys", on_delete="CASCADE", null=True)
    name = peewee.CharField(max_length=100, default="default")
    secret_hash = peewee.CharField(max_length=64)
    created_at = peewee.DateTimeField(default=utcnow)
    revoked_at = peewee.DateTimeField(null=True)
    expires_at = peewee.DateTimeField(null=True)
    #: Written at most once a minute per key (``auth_keys.LAST_USED_INTERVAL``), never on every request.
    last_used_at = peewee.DateTimeField(null=True)


class Endpoint(BaseModel):
    id = peewee.CharField(primary_key=True, max_length=40)
    tenant = peewee.ForeignKeyField(Tenant, backref="endpoints", on_delete="CASCADE")
    #: Where events go (its scheme names the kind of destination); sealed if it holds a password.
    url = SealedUrlField()
    #: Where each event goes as well while the endpoint is offline or disabled (any kind; migration 0026).
    fallback_url = SealedUrlField(null=True)
    description = peewee.TextField(default="")
    #: The owner's own id for it (the Svix API's endpoint ``uid``), unique among the tenant's live endpoints.
    uid = peewee.CharField(max_length=64, null=True)
    #: Event types this endpoint wants; empty means every (non-operational) type.
    event_types = JSONField(default=list)
    rate_limit = peewee.IntegerField(null=True)
    metadata = JSONField(default=dict)
    #: ``whsec_`` secret (v1) or ``whsk_`` private key (v1a), sealed at rest.
    secret = SealedField()
    #: The secret before the last rotation, still signed with until ``previous_secret_until``.
    previous_secret = SealedField(null=True)
    previous_secret_until = peewee.DateTimeField(null=True)
    disabled = peewee.BooleanField(default=False)
    disabled_reason = peewee.TextField(null=True)
    contact_email = peewee.CharField(max_length=320, null=True)
    #: Presence: ``online``, ``offline`` (parking, one probe) or ``recovering`` (releasing the parked).
    health = peewee.CharField(max_length=16, default="online")
    consecutive_failures = peewee.IntegerField(default=0)
    #: First failure since the last success (the disable clock runs from here).
    failing_since = peewee.DateTimeField(null=True)
    offline_since = peewee.DateTimeField(null=True)
    last_success_at = peewee.DateTimeField(null=True)
    #: While offline, the delivery the last probe was made with (``webhooks.health.probes``).
    probe_delivery_id = peewee.CharField(max_length=40, null=True)
    #: While offline, when the clock probes it next (None: ``PROBE_INTERVAL``'s first after ``offline_since``).
    next_probe_at = peewee.DateTimeField(null=True)
    #: Only events matching this filter reach it (``webhooks.catalog.filters``); None: every event.
    filter = JSONField(null=True)
    #: The Svix API's channels the endpoint listens to (null: every message). A message carries none here,
    #: so an endpoint with channels gets no message by fan-out (as on Svix), only resends and recovers.
    channels = JSONField(null=True)
    #: Token bucket of ``rate_limit``, shared by every worker process.
    rate_tokens = peewee.FloatField(null=True)
    rate_updated_at = peewee.DateTimeField(null=True)
    created_at = peewee.DateTimeField(default=utcnow)
    updated_at = peewee.DateTimeField(default=utcnow)
    #: Soft delete: the endpoint's attempts stay visible to support staff.
    deleted_at = peewee.DateTimeField(null=True)

    class Meta:
        indexes = ((("tenant", "deleted_at"), False), (("tenant", "uid"), False))


class Event(BaseModel):
    id = peewee.CharField(primary_key=True, max_length=40)
    tenant = peewee.ForeignKeyField(Tenant, backref="events", on_delete="CASCADE")
    seq = peewee.BigIntegerField()
    event_type = peewee.CharField(max_length=128)
    payload = PayloadField()
    created_at = peewee.DateTimeField(default=utcnow)
    #: W3C trace context of the request that posted it (tracing on), for its deliveries' attempt spans.
    traceparent = peewee.CharField(max_length=128, null=True)
    #: A test event (``POST /v1/endpoints/<id>/send-example``): sent to one endpoint, left out of the feed.
    test = peewee.BooleanField(default=False)

    class Meta:
        indexes = (
            (("tenant", "seq"), True),
            (("tenant", "event_type", "seq"), False),
            # The retention purge reads events oldest first off this one.
            (("created_at", "id"), False),
        )


class IdempotencyKey(BaseModel):
    """``(tenant, key)`` is unique: the loser of a race returns the winner's event."""

    tenant = peewee.ForeignKeyField(Tenant, on_delete="CASCADE")
    key = peewee.CharField(max_length=255)
    event = peewee.ForeignKeyField(Event, on_delete="CASCADE")
    request_hash = peewee.CharField(max_length=64)
    created_at = peewee.DateTimeField(default=utcnow, index=True)

    class Meta:
        indexes = ((("tenant", "key"), True),)


class IdempotentResponse(BaseModel):
    """The answer to a POST of the Svix API sent with an ``idempotency-key``: ``(api_key, key)`` is unique,
    ``status`` is null while the first request is being answered (``webhooks.svix.idempotency``)."""

    api_key = peewee.ForeignKeyField(ApiKey, on_delete="CASCADE")
    key = peewee.CharField(max_length=255)
    request_hash = peewee.CharField(max_length=64)
    status = peewee.IntegerField(null=True)
    body = peewee.TextField(null=True)
    created_at = peewee.DateTimeField(default=utcnow, index=True)

    class Meta:
        indexes = ((("api_key", "key"), True),)


class Delivery(BaseModel):
    """One event to one endpoint; ``attempts`` counts the attempts made so far."""

    id = peewee.CharField(primary_key=True, max_length=40)
    #: Indexed first in (tenant, id), newest first for the tenant's lists; failed ones also in a partial
    #: index of their own (migration 0029).
    tenant = peewee.ForeignKeyField(Tenant, on_delete="CASCADE", index=False)
    event = peewee.ForeignKeyField(Event, backref="deliveries", on_delete="CASCADE")
    #: Indexed first in (endpoint, status, created_at, id): no index of its own (migration 0013).
    endpoint = peewee.ForeignKeyField(Endpoint, backref="deliveries", on_delete="CASCADE", index=False)
    status = peewee.CharField(max_length=16, default=DeliveryStatus.PENDING)
    attempts = peewee.IntegerField(default=0)
    next_attempt_at = peewee.DateTimeField(null=True)
    last_status_code = peewee.IntegerField(null=True)
    last_error = peewee.TextField(null=True)
    #: Outbox mark: None until the message for the next attempt is confirmed by the broker.
    enqueued_at = peewee.DateTimeField(null=True)
    #: A worker holds the current attempt until then; a killed worker's claim expires.
    lease_until = peewee.DateTimeField(null=True)
    #: Resends and recovers among ``attempts``: they do not move the delivery down the ladder.
    manual_attempts = peewee.IntegerField(default=0)
    #: Set while the delivery is part of an endpoint's backlog, with no message in the broker:
    #: from then on it waits in the database; a time in the future means a worker took it
    #: back into memory until then (if that worker dies, another takes it after that time).
    spilled_at = peewee.DateTimeField(null=True)
    created_at = peewee.DateTimeField(default=utcnow)
    updated_at = peewee.DateTimeField(default=utcnow)
    delivered_at = peewee.DateTimeField(null=True)
    #: A copy of the event for the endpoint's ``fallback_url``, made because the endpoint was
    #: offline or disabled (``webhooks.ingest.fallback``): at most one per event and endpoint.
    fallback = peewee.BooleanField(default=False)

    class Meta:
        indexes = (
            (("status", "enqueued_at", "next_attempt_at"), False),
            (("endpoint", "status", "created_at", "id"), False),
            (("tenant", "id"), False),
        )


class Attempt(BaseModel):
    """One HTTP call: what was sent, what came back, how long it took, what happens next."""

    id = peewee.CharField(primary_key=True, max_length=40)
    #: These three are indexed first in the composite indexes below: no index of their own (migration 0013).
    delivery = peewee.ForeignKeyField(Delivery, backref="attempt_rows", on_delete="CASCADE", index=False)
    #: On PostgreSQL ``tenant``, ``event`` and ``endpoint`` carry no constraint and ``tenant`` no
    #: index (migration 0014): they are the delivery's, held by its keys and cascades.
    tenant = peewee.ForeignKeyField(Tenant, on_delete="CASCADE")
    event = peewee.ForeignKeyField(Event, on_delete="CASCADE", index=False)
    endpoint = peewee.ForeignKeyField(Endpoint, on_delete="CASCADE", index=False)
    attempt_no = peewee.IntegerField()
    #: ``ladder`` for the automatic schedule, ``resend`` or ``recover`` for a person's request.
    trigger = peewee.CharField(max_length=16, default="ladder")
    started_at = peewee.DateTimeField()
    duration_ms = peewee.FloatField()
    url = peewee.TextField()
    request_headers = JSONField()
    response_status = peewee.IntegerField(null=True)
    response_headers = JSONField(null=True)
    response_body = peewee.TextField(null=True)
    error_class = peewee.CharField(max_length=32, null=True)
    error = peewee.TextField(null=True)
    outcome = peewee.CharField(max_length=16)
    next_attempt_at = peewee.DateTimeField(null=True)
    #: An attempt of a fallback delivery (to the endpoint's ``fallback_url``).
    fallback = peewee.BooleanField(default=False)

    class Meta:
        indexes = (
            (("delivery", "attempt_no"), True),
            (("event", "id"), False),
            (("endpoint", "id"), False),
        )


class ManualAttempt(BaseModel):
    """A resend or recover someone asked for: the attempt it queued, who asked, and when.

    Written where every resend and recover is queued (``webhooks.actions``), whoever asked:
    a tenant API key (``api_key``, its id), a staff member in the console (``staff``, the
    email) or the command line (``cli``, the login name).
    """

    id = peewee.AutoField()
    delivery = peewee.ForeignKeyField(Delivery, backref="manual_attempt_rows", on_delete="CASCADE")
    event = peewee.ForeignKeyField(Event, on_delete="CASCADE")
    tenant = peewee.ForeignKeyField(Tenant, on_delete="CASCADE")
    #: The attempt number the request queued (``Attempt.attempt_no`` once it is made).
    attempt_no = peewee.IntegerField()
    #: ``resend`` or ``recover`` (a dead-letter replay is a recover).
    trigger = peewee.CharField(max_length=16)
    #: ``api_key``, ``staff`` or ``cli``.
    requested_by_kind = peewee.CharField(max_length=16)
    requested_by = peewee.CharField(max_length=320)
    created_at = peewee.DateTimeField(default=utcnow)

    class Meta:
        indexes = ((("event", "id"), False), (("delivery", "attempt_no"), False))


class HealthChange(BaseModel):
    """One change of an endpoint's presence, with its reason (``GET /v1/endpoints/<id>/health``)."""

    id = peewee.AutoField()
    endpoint = peewee.ForeignKeyField(Endpoint, backref="health_changes", on_delete="CASCADE")
    tenant = peewee.ForeignKeyField(Tenant, on_delete="CASCADE")
    from_state = peewee.CharField(max_length=16)
    to_state = peewee.CharField(max_length=16)
    reason = peewee.TextField()
    created_at = peewee.DateTimeField(default=utcnow)

    class Meta:
        indexes = ((("endpoint", "id"), False),)


class Alert(BaseModel):
    """An alert to send once per state change: an email and an operational event (an outbox row)."""

    id = peewee.AutoField()
    tenant = peewee.ForeignKeyField(Tenant, on_delete="CASCADE")
    endpoint = peewee.ForeignKeyField(Endpoint, null=True, on_delete="CASCADE")
    #: ``endpoint.offline``, ``endpoint.online``, ``endpoint.disabled`` or ``delivery.exhausted``.
    kind = peewee.CharField(max_length=32)
    #: What the alert is about, as the operational event's payload.
    data = JSONField()
    created_at = peewee.DateTimeField(default=utcnow)
    #: When the operational event was raised (None: not yet).
    raised_at = peewee.DateTimeField(null=True)
    event_id = peewee.CharField(max_length=40, null=True)
    #: When the email was sent, or why it was not.
    emailed_at = peewee.DateTimeField(null=True)
    email_status = peewee.TextField(null=True)

    class Meta:
        indexes = ((("raised_at",), False), (("emailed_at",), False))


class EndpointWindow(BaseModel):
    """One worker process's concurrency window for one endpoint, written every few seconds."""

    endpoint_id = peewee.CharField(max_length=40)
    #: ``host:pid`` of the worker process.
    worker = peewee.CharField(max_length=80)
    window = peewee.IntegerField()
    ceiling = peewee.IntegerField()
    in_flight = peewee.IntegerField()
    updated_at = peewee.DateTimeField()

    class Meta:
        primary_key = peewee.CompositeKey("endpoint_id", "worker")


class RetentionMark(BaseModel):
    """Per tenant, the highest ``seq`` the retention purge removed (``webhooks.storage.retention``).

    Written in the transaction that deletes the events, so the feed never misses a purge:
    a catch-up cursor below it answers 410 instead of skipping the purged events silently.
    """

    tenant = peewee.ForeignKeyField(Tenant, primary_key=True, on_delete="CASCADE")
    purged_seq = peewee.BigIntegerField()
    purged_at = peewee.DateTimeField()


class EventType(BaseModel):
    """An entry of the event-type catalog (``webhooks.catalog``): one for the whole service.

    ``version`` grows with each change of ``schema``, so a compiled validator is reused until then.
    """

    name = peewee.CharField(primary_key=True, max_length=128)
    description = peewee.TextField(default="")
    group_name = peewee.CharField(max_length=128, null=True)
    #: A JSON Schema (draft 2020-12) of the payload; None: any payload.
    schema = JSONField(null=True)
    examples = JSONField(default=list)
    deprecated = peewee.BooleanField(default=False)
    #: Archived (``DELETE``): kept for history, hidden from lists, refused when ``EVENT_TYPES_STRICT``.
    archived_at = peewee.DateTimeField(null=True)
    version = peewee.IntegerField(default=1)
    created_at = peewee.DateTimeField(default=utcnow)
    updated_at = peewee.DateTimeField(default=utcnow)
    #: Jinja templates of the emails ``mailto:`` endpoints get (``catalog.mail_templates``); None: the default.
    email_subject = peewee.TextField(null=True)
    email_text = peewee.TextField(null=True)
    email_html = peewee.TextField(null=True)

    class Meta:
        indexes = ((("group_name", "name"), False),)


#: Creation order (parents first).
ALL_MODELS: tuple[type[BaseModel], ...] = (
    Tenant, ApiKey, Endpoint, Event, IdempotencyKey, IdempotentResponse, Delivery, Attempt, ManualAttempt, HealthChange,
    Alert, EndpointWindow, RetentionMark, EventType,
)
