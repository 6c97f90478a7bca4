"""The HTTP kind (``http://``, ``https://``): a signed POST through ``sender.Sender``, as always.

The URL rules are ``netguard``'s (``URL_PATTERN``, ``split_url``); the call is the sender's,
whose SSRF guard sits at the socket (``guard``).
"""

from __future__ import annotations

from webhooks.delivery.destinations.base import Kind, Parcel
from webhooks.delivery.http_result import HttpResult
from webhooks.delivery.netguard import ALLOWED_SCHEMES, URL_PATTERN, Resolver, TargetPolicy, split_url
from webhooks.delivery.sender import Sender

KIND = Kind(name="HTTP", schemes=tuple(sorted(ALLOWED_SCHEMES)), pattern=URL_PATTERN, split=split_url)


class HttpDestination:
    """POSTs each parcel's body with its headers to the endpoint's URL."""

    kind = KIND

    def __init__(self, *, timeout: float, policy: TargetPolicy, resolver: Resolver | None = None) -> None:
        self.sender = Sender(timeout=timeout, policy=policy, resolver=resolver)

    async def deliver(self, url: str, parcel: Parcel) -> HttpResult:
        return await self.sender.post(url, parcel.request.headers, parcel.request.body)

    async def close(self) -> None:
        await self.sender.close()
