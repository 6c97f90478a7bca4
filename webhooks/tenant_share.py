"""A tenant's share while others are active: what the web server's turns and the worker's lanes both ask.

Both shrink a busy tenant's share of a process while another tenant has been active in it
recently (``webhooks.server.turns``: requests running at once; ``webhooks.delivery.lanes``:
quick deliveries under way), so that the other tenant's one request or delivery does not
queue behind the busy tenant's many. ``RecentTenants`` answers "has any tenant but this one
been active within the window?" in constant time; ``count_down`` keeps per-tenant counts
without tenants at zero.
"""

from __future__ import annotations

from typing import Hashable, TypeVar

K = TypeVar("K", bound=Hashable)

#: Seconds a tenant counts as active after it was last seen.
SHARE_WINDOW_SECONDS = 1.0


class RecentTenants:
    """The two tenants seen last, and when: enough to tell whether any tenant but a given one
    was seen within the window (the latest other than it is one of the two)."""

    __slots__ = ("_latest", "window")

    def __init__(self, window: float = SHARE_WINDOW_SECONDS) -> None:
        self.window = window
        self._latest: list[tuple[str, float]] = []

    def seen(self, tenant_id: str, now: float) -> None:
        latest = self._latest
        if latest and latest[0][0] == tenant_id:
            latest[0] = (tenant_id, now)
        else:
            self._latest = [(tenant_id, now), *latest[:1]]

    def others_active(self, tenant_id: str, now: float) -> bool:
        """Was a tenant other than ``tenant_id`` seen within the window before ``now``?"""
        for other, at in self._latest:
            if other != tenant_id:
                return now - at <= self.window
        return False


def count_down(counts: dict[K, int], key: K) -> None:
    """One less for ``key``; a key at zero is dropped."""
    left = counts.get(key, 0) - 1
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)
