"""``Destinations``: the engine's one way out, handing each parcel to the kind its URL's scheme names."""

from __future__ import annotations

from webhooks.delivery.destinations.base import Destination, Parcel, failure, scheme_of
from webhooks.delivery.destinations.http import HttpDestination
from webhooks.delivery.destinations.mailto import CatalogTemplates, Email
from webhooks.delivery.destinations.rabbitmq import RabbitMQ
from webhooks.delivery.destinations.redis_streams import RedisStreams
from webhooks.delivery.http_result import HttpResult
from webhooks.delivery.netguard import Resolver, TargetPolicy


class Destinations:
    """Every kind's ``Destination``, by scheme; built inside the running loop and shared by every delivery."""

    def __init__(self, destinations: list[Destination]) -> None:
        self.by_scheme: dict[str, Destination] = {
            scheme: destination for destination in destinations for scheme in destination.kind.schemes
        }
        self._all = destinations

    @classmethod
    def open(cls, *, timeout: float, policy: TargetPolicy, resolver: Resolver | None = None,
             smtp_url: str | None = None, templates_ttl: float = 5.0) -> Destinations:
        """Every kind there is, each with one deadline of ``timeout`` seconds per delivery and the SSRF ``policy``;
        email goes through ``smtp_url`` (the operator's server) with the catalog's templates, read again
        every ``templates_ttl`` seconds."""
        return cls([HttpDestination(timeout=timeout, policy=policy, resolver=resolver),
                    RabbitMQ(timeout=timeout, policy=policy, resolver=resolver),
                    RedisStreams(timeout=timeout, policy=policy, resolver=resolver),
                    Email(timeout=timeout, smtp_url=smtp_url, templates=CatalogTemplates(templates_ttl))])

    async def deliver(self, url: str, parcel: Parcel) -> HttpResult:
        """Deliver ``parcel`` to ``url`` through its kind; a URL of no kind fails as a ``protocol`` error."""
        scheme = scheme_of(url)
        destination = self.by_scheme.get(scheme)
        if destination is None:
            return failure("protocol", f"invalid URL: no destination of kind {scheme or 'missing'!r}")
        return await destination.deliver(url, parcel)

    async def close(self) -> None:
        """Close every kind's connections."""
        for destination in self._all:
            await destination.close()
