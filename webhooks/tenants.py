"""Tenants, the platform's customers: create, change, soft delete, and purge once deleted.

Shared by ``flask tenant create``, ``/v1/tenants`` and the clock. Names (whatever their case) and
uids are unique among live tenants. Deleting a tenant is a soft delete that is safe while
its deliveries are in flight (see ``delete_tenant``); the clock purges its rows after
``PURGE_AFTER``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import peewee

from webhooks import actions
from webhooks.errors import InvalidInput
from webhooks.ingest import auth_keys
from webhooks.portal import access
from webhooks.storage.db import write
from webhooks.storage.ids import new_id
from webhooks.storage.models import Delivery, Endpoint, Event, Tenant
from webhooks.storage.retention import delete_events
from webhooks.storage.timeutil import utcnow

#: A deleted tenant's rows are purged this long after the delete: an attempt in flight at the
#: delete (its worker's lease lasts far less) has ended and been recorded by then.
PURGE_AFTER = timedelta(hours=1)

#: Events removed per transaction when purging a deleted tenant.
PURGE_BATCH = 500


class TenantTaken(InvalidInput):
    """Another live tenant already has this name or uid: ``field`` says which, ``existing`` who."""

    def __init__(self, field: str, value: str, existing: Tenant | None) -> None:
        owner = f" ({existing.id})" if existing is not None else ""
        super().__init__(f"a tenant with the {field} {value!r} already exists{owner}")
        self.field, self.existing = field, existing


def _check_free(name: str | None, uid: str | None, but: str | None = None) -> None:
    """TenantTaken when a live tenant other than ``but`` has ``name`` (any case) or ``uid``."""
    if name is not None:
        existing = auth_keys.tenant_named(name)
        if existing is not None and existing.id != but:
            raise TenantTaken("name", name, existing)
    if uid is not None:
        existing = Tenant.get_or_none((Tenant.uid == uid) & Tenant.deleted_at.is_null())
        if existing is not None and existing.id != but:
            raise TenantTaken("uid", uid, existing)


def create_tenant(name: str, uid: str | None = None, metadata: dict[str, str] | None = None,
                  contact_email: str | None = None) -> Tenant:
    """A new live tenant (no key: ``flask tenant create`` issues its first). TenantTaken if taken."""
    try:
        with write():
            _check_free(name, uid)
            return Tenant.create(id=new_id("ten"), name=name, uid=uid, metadata=metadata or {},
                                 contact_email=contact_email)
    except peewee.IntegrityError:  # created by someone else between the check and the insert
        _check_free(name, uid)
        raise TenantTaken("name or uid", name, None) from None


def update_tenant(tenant: Tenant, changes: dict[str, Any]) -> Tenant:
    """Change ``name``, ``uid`` (None clears it) and ``metadata`` (replaced whole). TenantTaken if taken."""
    try:
        with write():
            _check_free(changes.get("name"), changes.get("uid"), but=tenant.id)
            if changes:
                Tenant.update(**changes).where(Tenant.id == tenant.id).execute()
    except peewee.IntegrityError:
        _check_free(changes.get("name"), changes.get("uid"), but=tenant.id)
        raise TenantTaken("name or uid", str(changes), None) from None
    auth_keys.key_cache.forget_tenant(tenant.id)  # cached keys carry the tenant row
    return Tenant.get_by_id(tenant.id)


def delete_tenant(tenant: Tenant, now: datetime | None = None) -> None:
    """Soft-delete ``tenant``, in one transaction:

    - its name and uid are free at once, and it is gone from every lookup (404);
    - its portal sessions end and its unopened portal links are void;
    - its API keys are revoked (this process refuses them now, others within the key cache's
      lifetime) and it takes no new event whatever key is presented (the seq bump finds no tenant);
    - its endpoints are deleted and its unfinished deliveries cancelled: an attempt already in
      flight ends and is recorded, nothing more is attempted;
    - the clock purges its rows (events, deliveries, attempts, endpoints, keys) ``PURGE_AFTER`` later.
    """
    now = now or utcnow()
    with write():
        Tenant.update(deleted_at=now).where(Tenant.id == tenant.id).execute()
        auth_keys.revoke_api_keys(tenant)
        actions.delete_endpoints(Endpoint.tenant == tenant.id, Delivery.tenant == tenant.id, now)
        access.end_sessions(tenant)


def purge_deleted(now: datetime | None = None, batch: int = PURGE_BATCH) -> int:
    """The clock's job: remove one batch of events of each tenant deleted before ``PURGE_AFTER``,
    and the tenant row (its endpoints, keys and the rest cascade) once none is left.
    Returns how many events and tenants were removed."""
    before = (now or utcnow()) - PURGE_AFTER
    removed = 0
    for tenant_id in Tenant.select(Tenant.id).where(Tenant.deleted_at < before).tuples():
        ids = [row[0] for row in Event.select(Event.id).where(Event.tenant == tenant_id[0]).limit(batch).tuples()]
        with write():
            if ids:
                removed += delete_events(ids).events
            else:
                removed += Tenant.delete().where(Tenant.id == tenant_id[0]).execute()
    return removed
