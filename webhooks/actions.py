"""What people do to deliveries and endpoints: resend, recover, probe now, create, rotate the
secret, send a test event, delete, disable and enable.

Shared by the API, the console, the portal and the CLI so each action has one
implementation. Every resend, recover and "try now" probe is recorded here
(``ManualAttempt``) with who asked for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from webhooks.errors import BrokerError, InvalidInput
from webhooks.config import ProbeInterval, Settings
from webhooks.delivery import netguard
from webhooks.delivery.destinations import check_target, kind_of, mailto
from webhooks.delivery.destinations.rabbitmq import own_broker_problem
from webhooks.delivery.signing import generate_key
from webhooks.health import presence, probes
from webhooks.secrecy import unmasked
from webhooks.storage import db
from webhooks.storage.db import locking, retrying, write
from webhooks.storage.ids import new_id
from webhooks.messaging.messages import DeliveryMessage
from webhooks.storage.models import Delivery, Endpoint, Event, ManualAttempt, Tenant
from webhooks.messaging.outbox import message_for, publish_messages
from webhooks.messaging.publisher import Publisher
from webhooks.storage.statuses import DeliveryStatus, LADDER_STATUSES, UNFINISHED_STATUSES
from webhooks.storage.timeutil import seconds, to_naive_utc, utcnow
from webhooks.messaging.topology import Topology

#: Deliveries ``recover`` resends: parked ones are not among them, they wait for the
#: endpoint and are released in order (``webhooks.health.releaser``), their attempts intact.
RECOVERABLE_STATUSES = (DeliveryStatus.FAILED,)


#: Resends published per broker round of ``recover``.
RECOVER_BATCH = 500


#: Who may ask for a resend or recover: a tenant API key, a staff member, the command line, a portal session.
REQUESTER_KINDS = ("api_key", "staff", "cli", "portal")


class BrokerUnavailable(BrokerError):
    """The message could not be queued; nothing was changed."""


@dataclass(frozen=True)
class Requester:
    """Who asked: ``api_key`` (the key's id), ``staff`` (an email), ``cli`` (a login name) or ``portal``
    (the session's audit actor, ``portal:<tenant id>:<session>``)."""

    kind: str
    name: str

    def __post_init__(self) -> None:
        if self.kind not in REQUESTER_KINDS:
            raise ValueError(f"unknown requester kind {self.kind!r}")


def _context(publisher: Publisher | None, topology: Topology | None) -> tuple[Publisher, Topology]:
    from webhooks.ingest.accept import request_defaults

    publisher, topology, _ = request_defaults(publisher, topology)
    return publisher, topology


def _queue_now(
    messages: list[DeliveryMessage], requester: Requester, publisher: Publisher, topology: Topology
) -> int:
    """Publish fresh attempts, record who asked for each, and show finished deliveries as due
    now; returns how many were queued.

    A delivery still in the ladder keeps its ``next_attempt_at``: if the fresh attempt
    fails, its next ladder attempt stays due when it was (a resend never moves a delivery
    down the ladder).
    """
    confirmed = publish_messages(publisher, topology, messages)
    now = utcnow()
    with write():
        _record_requester(messages[:confirmed], requester, now)
        for message in messages[:confirmed]:
            (
                Delivery.update(next_attempt_at=now, updated_at=now)
                .where(
                    (Delivery.id == message.delivery_id)
                    & (Delivery.attempts == message.attempt - 1)
                    & Delivery.status.not_in(LADDER_STATUSES)
                )
                .execute()
            )
    return confirmed


def _record_requester(messages: list[DeliveryMessage], requester: Requester, now: datetime) -> None:
    """Remember who asked for each of these attempts (in the caller's transaction)."""
    if messages:
        ManualAttempt.insert_many([
            {
                "delivery": message.delivery_id, "event": message.event_id, "tenant": message.tenant_id,
                "attempt_no": message.attempt, "trigger": message.trigger,
                "requested_by_kind": requester.kind, "requested_by": requester.name, "created_at": now,
            }
            for message in messages
        ]).execute()


@retrying
def resend(
    delivery: Delivery,
    trigger: str = "resend",
    *,
    requester: Requester,
    publisher: Publisher | None = None,
    topology: Topology | None = None,
) -> Delivery:
    """Queue a fresh attempt of ``delivery`` now, outside the ladder (or ahead of it), asked for by ``requester``.

    A parked delivery whose fresh attempt fails stays parked, in its place for the release.
    """
    if delivery.status == DeliveryStatus.CANCELLED:
        raise ValueError("the delivery was cancelled because its endpoint was deleted")
    publisher, topology = _context(publisher, topology)
    message = message_for(delivery, Event.get_by_id(delivery.event_id), trigger=trigger)
    if _queue_now([message], requester, publisher, topology) != 1:
        raise BrokerUnavailable("the message broker is unavailable; try again in a few seconds")
    return Delivery.get_by_id(delivery.id)


def probe_now(endpoint: Endpoint, interval: ProbeInterval, *, requester: Requester,
              publisher: Publisher | None = None, topology: Topology | None = None) -> DeliveryMessage:
    """Try now: probe an offline endpoint at once, asked for by ``requester``; the probe's message.

    The probe is an attempt of the endpoint's oldest undelivered delivery, outside the
    ladder: if it succeeds the endpoint is back and its paced, in-order release starts; if
    not, nothing is used up and the clock goes on probing it (``webhooks.health.probes``).
    NotProbed (a ValueError) says why the endpoint cannot be probed; nothing is changed then.
    """
    publisher, topology = _context(publisher, topology)
    message = probes.take_probe(endpoint.id, interval, due_only=False)
    if publish_messages(publisher, topology, [message]) != 1:
        raise BrokerUnavailable("the message broker is unavailable; try again in a few seconds")
    with write():
        _record_requester([message], requester, utcnow())
    return message


@dataclass(frozen=True)
class Recovered:
    """What ``recover`` did: failed deliveries queued now, parked ones left to the release."""

    queued: int
    parked: int


def recover(
    endpoint: Endpoint,
    since: datetime,
    *,
    requester: Requester,
    publisher: Publisher | None = None,
    topology: Topology | None = None,
) -> Recovered:
    """Resend every failed delivery of ``endpoint`` created since ``since``, oldest first.

    Parked deliveries stay parked: they are released one at a time, in creation order and
    with the attempts they have left, once the endpoint is reachable (offline: when its
    probe succeeds; disabled: when it is enabled). Should the endpoint be online with
    deliveries still parked (nothing would release them), it goes ``recovering`` so the
    clock releases them now.
    """
    publisher, topology = _context(publisher, topology)
    # The endpoint's own deliveries: a fallback copy is resent on its own, if at all.
    mine = (Delivery.endpoint == endpoint) & (Delivery.created_at >= to_naive_utc(since)) & ~Delivery.fallback
    query = (
        Delivery.select(Delivery, Event)
        .join(Event)
        .where(mine & Delivery.status.in_(RECOVERABLE_STATUSES))
        .order_by(Delivery.created_at, Delivery.id)
    )
    rows = list(query)
    queued = 0
    for start in range(0, len(rows), RECOVER_BATCH):
        batch = [message_for(row, row.event, trigger="recover") for row in rows[start : start + RECOVER_BATCH]]
        done = _queue_now(batch, requester, publisher, topology)
        queued += done
        if done < len(batch):
            break
    if rows and not queued:
        raise BrokerUnavailable("the message broker is unavailable; try again in a few seconds")
    _release_if_stranded(endpoint)
    parked = Delivery.select().where(mine & (Delivery.status == DeliveryStatus.PARKED)).count()
    return Recovered(queued, parked)


@retrying
def _release_if_stranded(endpoint: Endpoint) -> None:
    """An online, enabled endpoint with parked deliveries goes ``recovering``: the clock releases them in order."""
    with write():
        row = locking(Endpoint.select().where(Endpoint.id == endpoint.id)).get()
        if row.health == presence.ONLINE and not row.disabled and row.deleted_at is None and presence.has_parked(row.id):
            presence.change(row, presence.RECOVERING, "recover: parked deliveries to release", utcnow(),
                            health=presence.RECOVERING)


@retrying
def delete_endpoint(endpoint: Endpoint) -> None:
    """Soft-delete ``endpoint`` (its attempts stay visible) and cancel what it was still owed."""
    with write():
        delete_endpoints(Endpoint.id == endpoint.id, Delivery.endpoint == endpoint, utcnow())


def delete_endpoints(endpoints: Any, deliveries: Any, now: datetime) -> None:
    """Soft-delete the live endpoints matching ``endpoints`` and cancel the unfinished deliveries
    matching ``deliveries`` (theirs). A worker's attempt in flight ends and is recorded; nothing
    more is attempted (the worker drops a message whose delivery is cancelled). In a transaction."""
    Endpoint.update(deleted_at=now, updated_at=now).where(endpoints & Endpoint.deleted_at.is_null()).execute()
    (
        Delivery.update(status=DeliveryStatus.CANCELLED, next_attempt_at=None, updated_at=now)
        .where(deliveries & Delivery.status.in_(UNFINISHED_STATUSES))
        .execute()
    )


@retrying
def set_endpoint_disabled(endpoint: Endpoint, disabled: bool, reason: str | None = None) -> Endpoint:
    """Disable ``endpoint`` (it gets no calls; its deliveries park) or enable it again.

    Enabling hands its parked deliveries to the clock, which releases them in order, paced.
    """
    now = utcnow()
    with write():
        row = locking(Endpoint.select().where(Endpoint.id == endpoint.id)).get()
        if disabled:
            presence.disable(row, reason or "disabled by a person", now)
        else:
            presence.enable(row, now)
    return Endpoint.get_by_id(endpoint.id)


class EndpointLimitReached(InvalidInput):
    """The tenant has ``MAX_ENDPOINTS_PER_TENANT`` live endpoints already."""


def target_problem(url: str, settings: Settings) -> str | None:
    """Why ``url`` may not be called (the SSRF rules of ``netguard``; not this service's own broker vhost;
    an email address while this service sends no email), or None."""
    policy = netguard.TargetPolicy.from_strings(settings.allow_private_targets, settings.allowed_target_networks)
    try:
        check_target(url, policy)
    except (netguard.BlockedAddress, ValueError) as error:  # UnresolvableHost is a BlockedAddress
        return str(error)
    if kind_of(url) is mailto.KIND and not settings.smtp_url:
        return "this service sends no email (its operator has not set SMTP_URL): use another kind of destination"
    return own_broker_problem(url, settings.amqp_url)


#: An endpoint's destination URLs: each a kind of destination, checked alike, a password in it sealed and masked.
URL_FIELDS = ("url", "fallback_url")


def check_destinations(fields: dict[str, Any], endpoint: Endpoint | None, settings: Settings) -> dict[str, str]:
    """Make the destination URLs of ``fields`` (changes to ``endpoint``, or a new one's) what is to be
    stored, in place, and say what is wrong with them: ``{field: problem}``, empty when nothing is.

    A URL sent back as it was shown, its password ``***``, keeps the stored password
    (``secrecy.unmasked``); a URL that changes is checked by ``target_problem`` (SSRF rules, not
    this service's own broker). One place for the API, the portal and the Svix API.
    """
    problems: dict[str, str] = {}
    for name in URL_FIELDS:
        if fields.get(name) is None:
            continue
        stored = getattr(endpoint, name) if endpoint is not None else None
        try:
            fields[name] = unmasked(fields[name], stored)
        except ValueError as error:
            problems[name] = str(error)
            continue
        if fields[name] != stored:
            problem = target_problem(fields[name], settings)
            if problem:
                problems[name] = problem
    return problems


def _within_endpoint_limit(tenant_id: str, limit: int) -> None:
    """EndpointLimitReached when the tenant has ``limit`` live endpoints already (0: no limit).

    Inside the creating transaction, with the tenant row locked (``db.locking``; SQLite's
    writers are serialised anyway), so two creations at once cannot both pass the count.
    """
    if not limit:
        return
    db.locking(Tenant.select(Tenant.id).where(Tenant.id == tenant_id)).execute()
    live = Endpoint.select().where((Endpoint.tenant == tenant_id) & Endpoint.deleted_at.is_null()).count()
    if live >= limit:
        raise EndpointLimitReached(
            f"this tenant has {live} endpoints, the most it may have (MAX_ENDPOINTS_PER_TENANT={limit}): each "
            "endpoint receives every event it subscribes to, so their number is bounded; delete one, or subscribe "
            "an existing one to more event types")


def create_endpoint(tenant_id: str, fields: dict[str, Any], *, scheme: str, max_endpoints: int) -> Endpoint:
    """Register an endpoint with ``fields`` (validated by the caller) and a new key of ``scheme``.
    EndpointLimitReached past ``MAX_ENDPOINTS_PER_TENANT``; nothing is written then."""
    now = utcnow()
    with write():
        _within_endpoint_limit(tenant_id, max_endpoints)
        return Endpoint.create(id=new_id("ep"), tenant=tenant_id, secret=generate_key(scheme), created_at=now,
                               updated_at=now, **fields)


@retrying
def update_endpoint(endpoint: Endpoint, changes: dict[str, Any]) -> Endpoint:
    """Change an endpoint's settings (``changes`` validated by the caller); applies from its next attempt."""
    if changes:
        with write():
            Endpoint.update(**changes, updated_at=utcnow()).where(Endpoint.id == endpoint.id).execute()
    return Endpoint.get_by_id(endpoint.id)


@retrying
def rotate_secret(endpoint: Endpoint, overlap: float, scheme: str, secret: str | None = None) -> Endpoint:
    """Replace the signing key (``secret``, or a new one of ``scheme``); the old one still signs for ``overlap`` s."""
    now = utcnow()
    with write():
        (
            # previous_secret = the secret column as it was: concurrent rotations cannot lose one.
            Endpoint.update(
                previous_secret=Endpoint.secret,
                previous_secret_until=now + seconds(overlap),
                secret=secret or generate_key(scheme),
                updated_at=now,
            )
            .where(Endpoint.id == endpoint.id)
            .execute()
        )
        return Endpoint.get_by_id(endpoint.id)


#: The type of the events "send a test event" sends.
TEST_EVENT_TYPE = "webhook.test"


def send_test_event(endpoint: Endpoint, sent_by: str) -> Event:
    """A test event for ``endpoint`` alone, through the real pipeline (stored, queued, signed, attempted)."""
    from webhooks.ingest.accept import accept_test_event

    payload = {"message": "A test event: your endpoint is reachable and verifies signatures.",
               "endpoint_id": endpoint.id, "sent_by": sent_by}
    return accept_test_event(Tenant.get_by_id(endpoint.tenant_id), endpoint.id, TEST_EVENT_TYPE, payload).event
