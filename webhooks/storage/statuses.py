"""Delivery statuses and endpoint health states, and the groups of them that rules act on.

A delivery of a deleted endpoint is ``cancelled`` (a soft delete: its attempts are kept);
an endpoint's health is read-only, derived from its deliveries and probes.
"""

from __future__ import annotations

import enum


class DeliveryStatus(enum.StrEnum):
    """A delivery's status (and an attempt's ``outcome``: the status it left the delivery in).
    A ``str``: stored, compared and shown as its value."""

    #: Waiting for its first attempt.
    PENDING = "pending"
    #: An attempt failed; the next one waits in a tier of the ladder.
    RETRYING = "retrying"
    #: Its endpoint is offline, recovering or disabled: it waits to be released, in order.
    PARKED = "parked"
    DELIVERED = "delivered"
    #: The ladder ran out (or a resend failed): the list operators replay from.
    FAILED = "failed"
    #: Its endpoint was deleted.
    CANCELLED = "cancelled"


#: Every status a delivery can have.
DELIVERY_STATUSES = tuple(DeliveryStatus)

#: Statuses a ladder attempt may act on: the ladder is running.
LADDER_STATUSES = (DeliveryStatus.PENDING, DeliveryStatus.RETRYING)

#: Statuses a person's resend or recover may act on (not cancelled).
MANUAL_STATUSES = (DeliveryStatus.PENDING, DeliveryStatus.RETRYING, DeliveryStatus.FAILED, DeliveryStatus.DELIVERED,
                   DeliveryStatus.PARKED)

#: Statuses that still wait for an attempt (deleting the endpoint cancels them).
UNFINISHED_STATUSES = (DeliveryStatus.PENDING, DeliveryStatus.RETRYING, DeliveryStatus.PARKED)

#: Statuses a probe of an offline endpoint may act on: any delivery it still owes.
PROBE_STATUSES = UNFINISHED_STATUSES

#: An endpoint's health (``webhooks.health.presence`` moves it between these).
ONLINE, OFFLINE, RECOVERING, DISABLED = "online", "offline", "recovering", "disabled"

#: Health states in which new deliveries park instead of being sent.
PARKING_STATES = (OFFLINE, RECOVERING)
