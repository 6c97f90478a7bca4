"""Delivery statuses and endpoint health states, and the groups of them that rules act on.

A delivery of a deleted endpoint is ``cancelled`` (a soft delete: its attempts are kept);
an endpoint's health is read-only, derived from its deliveries and probes.
"""

from __future__ import annotations

#: Every status a delivery can have.
DELIVERY_STATUSES = ("pending", "retrying", "parked", "delivered", "failed", "cancelled")

#: Statuses a ladder attempt may act on: the ladder is running.
LADDER_STATUSES = ("pending", "retrying")

#: Statuses a person's resend or recover may act on (not cancelled).
MANUAL_STATUSES = ("pending", "retrying", "failed", "delivered", "parked")

#: Statuses that still wait for an attempt (deleting the endpoint cancels them).
UNFINISHED_STATUSES = ("pending", "retrying", "parked")

#: Statuses a probe of an offline endpoint may act on: any delivery it still owes.
PROBE_STATUSES = UNFINISHED_STATUSES

#: An endpoint's health (``webhooks.health.presence`` moves it between these).
ONLINE, OFFLINE, RECOVERING, DISABLED = "online", "offline", "recovering", "disabled"

#: Health states in which new deliveries park instead of being sent.
PARKING_STATES = (OFFLINE, RECOVERING)
