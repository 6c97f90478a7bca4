"""What a delivery attempt needs of its endpoint, read in the same transaction as the claim.

Read fresh for every attempt (the claim locks the endpoint row anyway for its limits),
so a PATCH, delete or secret rotation applies from the very next attempt. A fallback delivery
sees the endpoint with its ``fallback_url`` in place of its ``url`` (``fallback_of``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from webhooks.storage.models import Endpoint


@dataclass(frozen=True)
class EndpointView:
    id: str
    url: str
    #: Signing keys (``whsec_`` or ``whsk_``): kept out of ``repr`` so no log line or traceback shows them.
    secret: str = field(repr=False)
    previous_secret: str | None = field(repr=False)
    previous_secret_until: datetime | None

    @classmethod
    def of(cls, endpoint: Endpoint) -> "EndpointView":
        return cls(endpoint.id, endpoint.url, endpoint.secret, endpoint.previous_secret, endpoint.previous_secret_until)

    @classmethod
    def fallback_of(cls, endpoint: Endpoint) -> "EndpointView":
        """The endpoint as its fallback deliveries see it: its ``fallback_url``, signed with its own secrets."""
        assert endpoint.fallback_url is not None
        return cls(endpoint.id, endpoint.fallback_url, endpoint.secret, endpoint.previous_secret,
                   endpoint.previous_secret_until)
