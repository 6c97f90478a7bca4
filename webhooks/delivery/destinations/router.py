"""``Destinations``: the engine's one way out, handing each parcel to the kind its URL's scheme names.

A kind answers every problem of its destination as a result; an exception it raises is a bug of ours. That too
becomes a failed attempt (``internal``), recorded and retried up the ladder like any other, its traceback in the
worker's log, rather than a message that goes back to the queue unrecorded, again and again.
"""

from __future__ import annotations

import logging

from webhooks.delivery.destinations.base import Destination, Parcel, failure, scheme_of
from webhooks.delivery.destinations.http import HttpDestination
from webhooks.delivery.destinations.mailto import CatalogTemplates, Email
from webhooks.delivery.destinations.rabbitmq import RabbitMQ
from webhooks.delivery.destinations.redis_streams import RedisStreams
from webhooks.delivery.http_result import HttpResult
from webhooks.delivery.netguard import Resolver, TargetPolicy

log = logging.getLogger(__name__)


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
        try:
            return await destination.deliver(url, parcel)
        except Exception as exc:  # noqa: BLE001 - a bug: logged in full, an attempt that failed for the ladder
            log.exception("unexpected error delivering event=%s through the %s destination", parcel.event_id,
                          destination.kind.name)
            # The exception's text is not kept: it could quote the URL's password.
            return failure("internal", f"unexpected error in the {destination.kind.name} destination "
                                       f"({type(exc).__name__}): the worker's log has the details")

    async def close(self) -> None:
        """Close every kind's connections."""
        for destination in self._all:
            await destination.close()
