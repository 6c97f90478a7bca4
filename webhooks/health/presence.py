"""Endpoint presence (a circuit breaker shared by every worker): online, offline, recovering.

After ``OFFLINE_AFTER_FAILURES`` consecutive failures an endpoint goes offline: its
deliveries park, none climbs the ladder, and the clock probes it at a bounded interval
(``webhooks.health.probes``). A success (a probe's) brings it back: ``recovering`` while the clock releases its parked deliveries in
order, then ``online``. Each change is recorded with its reason and raises one alert.
Every function here runs inside the caller's transaction, on a locked endpoint row.

A batch of attempts to one endpoint changes its row once (``EndpointWrites``), not once
per attempt: PostgreSQL keeps every version of a row that one transaction updates, and
each later update of it walks them all, so a batch of a hundred failures to one endpoint
spent most of its time there (and held the row's lock meanwhile).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from webhooks.secrecy import mask
from webhooks.storage.models import Alert, Delivery, Endpoint, HealthChange
from webhooks.storage.statuses import DISABLED, DeliveryStatus, OFFLINE, ONLINE, RECOVERING  # noqa: F401 - the states, named here too


def health_of(endpoint: Endpoint) -> str:
    """The read-only ``health`` shown to people: ``disabled`` wins over presence."""
    return DISABLED if endpoint.disabled else endpoint.health


class EndpointWrites:
    """Column changes to one locked endpoint row: the model shows them at once, the row gets them in one UPDATE."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.columns: dict[str, Any] = {}

    def set(self, **columns: Any) -> None:
        _mirror(self.endpoint, columns)
        self.columns.update(columns)

    def flush(self) -> None:
        """Write what was set since the last flush (nothing, if nothing was)."""
        if self.columns:
            Endpoint.update(**self.columns).where(Endpoint.id == self.endpoint.id).execute()
            self.columns = {}

    def change(self, to_state: str, reason: str, now: datetime, **columns: Any) -> None:
        """``change``, writing what was set and not yet written in the same UPDATE (a later
        ``flush`` must never write older values over the change's)."""
        pending, self.columns = self.columns, {}
        change(self.endpoint, to_state, reason, now, **{**pending, **columns})

    def disable(self, reason: str, now: datetime) -> None:
        """Stop calling the endpoint; its deliveries park until it is enabled."""
        if not self.endpoint.disabled:
            self.change(DISABLED, reason, now, disabled=True, disabled_reason=reason)


def _mirror(endpoint: Endpoint, columns: dict[str, Any]) -> None:
    """Make the model say what its row now says."""
    for name, value in columns.items():
        setattr(endpoint, name, value)


def change(endpoint: Endpoint, to_state: str, reason: str, now: datetime, **columns: Any) -> None:
    """Move ``endpoint`` to ``to_state`` (with extra column updates), record it, raise its alert."""
    from_state = health_of(endpoint)
    Endpoint.update(updated_at=now, **columns).where(Endpoint.id == endpoint.id).execute()
    _mirror(endpoint, {"updated_at": now, **columns})
    HealthChange.create(
        endpoint=endpoint.id, tenant=endpoint.tenant_id, from_state=from_state, to_state=to_state, reason=reason, created_at=now
    )
    kind = alert_for(from_state, to_state)
    if kind is not None:
        raise_alert(endpoint, kind, reason, now, health=to_state)


def alert_for(from_state: str, to_state: str) -> str | None:
    """The alert a transition raises: one per outage, not one per failure.

    Reachable again (offline or disabled to online or recovering) is news; the end of
    the paced release that follows (recovering to online) is not.
    """
    if to_state == OFFLINE:
        return "endpoint.offline"
    if to_state == DISABLED:
        return "endpoint.disabled"
    if to_state in (ONLINE, RECOVERING) and from_state in (OFFLINE, DISABLED):
        return "endpoint.online"
    return None


def raise_alert(endpoint: Endpoint, kind: str, reason: str, now: datetime, **data: Any) -> None:
    """Queue one alert (email + operational event) about ``endpoint``; the clock sends it."""
    Alert.create(
        tenant=endpoint.tenant_id,
        endpoint=endpoint.id,
        kind=kind,
        data={"endpoint_id": endpoint.id, "url": mask(endpoint.url), "reason": reason, **data},
        created_at=now,
    )


#: The columns of an endpoint that is not offline (nor about to be probed).
NOT_PROBING = {"offline_since": None, "probe_delivery_id": None, "next_probe_at": None}


def has_parked(endpoint_id: str) -> bool:
    return Delivery.select().where((Delivery.endpoint == endpoint_id) & (Delivery.status == DeliveryStatus.PARKED)).exists()


#: A healthy endpoint's ``last_success_at`` is refreshed at most this often (seconds), so
#: successes do not each write (and lock) the endpoint row.
LAST_SUCCESS_RESOLUTION_SECONDS = 60.0


def needs_update(endpoint: Endpoint, delivered: bool, now: datetime) -> bool:
    """Whether an attempt's outcome changes anything on the endpoint row."""
    if not delivered:
        return True
    return (
        endpoint.consecutive_failures > 0
        or endpoint.failing_since is not None
        or (endpoint.health == OFFLINE and not endpoint.disabled)
        or endpoint.last_success_at is None
        or (now - endpoint.last_success_at).total_seconds() > LAST_SUCCESS_RESOLUTION_SECONDS
    )


def record_success(writes: EndpointWrites, now: datetime) -> None:
    """An attempt succeeded: the endpoint is reachable."""
    endpoint = writes.endpoint
    columns = {"consecutive_failures": 0, "failing_since": None, "last_success_at": now}
    if endpoint.health == OFFLINE and not endpoint.disabled:
        state = RECOVERING if has_parked(endpoint.id) else ONLINE
        writes.change(state, "an attempt succeeded", now, health=state, **NOT_PROBING, **columns)
    else:
        writes.set(**columns)


def record_failure(writes: EndpointWrites, summary: str, counts: bool, threshold: int, now: datetime) -> None:
    """An attempt failed; ``counts`` is False for a 429 (the endpoint is up, just busy)."""
    if not counts:
        return
    endpoint = writes.endpoint
    failures = endpoint.consecutive_failures + 1
    columns = {"consecutive_failures": failures, "failing_since": endpoint.failing_since or now}
    if endpoint.health != OFFLINE and not endpoint.disabled and failures >= threshold:
        reason = f"{failures} consecutive failures, the last: {summary}"
        # The first probe comes ``PROBE_INTERVAL``'s first interval from now (``next_probe_at`` None).
        writes.change(OFFLINE, reason, now, health=OFFLINE, **{**NOT_PROBING, "offline_since": now}, **columns)
    else:
        writes.set(**columns)


def disable(endpoint: Endpoint, reason: str, now: datetime) -> None:
    """Stop calling ``endpoint``; its deliveries park until it is enabled."""
    EndpointWrites(endpoint).disable(reason, now)


def enable(endpoint: Endpoint, now: datetime) -> None:
    """Enable ``endpoint`` again; what it missed is released in order by the clock."""
    if not endpoint.disabled:
        return
    state = RECOVERING if has_parked(endpoint.id) else ONLINE
    change(
        endpoint, state, "enabled", now,
        disabled=False, disabled_reason=None, health=state, consecutive_failures=0,
        failing_since=None, **NOT_PROBING,
    )
