"""Every kind of destination by scheme, and the checks of a URL where it is registered.

The API and the portal accept a URL only when its scheme names a kind listed here
(``split_target``, ``URL_PATTERN``); ``check_target`` adds the SSRF rule for its host
(``netguard.check_host``), the same for every kind that connects to the host its URL names
(``mailto:`` names none: its mail goes to the operator's ``SMTP_URL``).
"""

from __future__ import annotations

from webhooks.delivery.destinations import http, mailto, rabbitmq, redis_streams
from webhooks.delivery.destinations.base import Kind, scheme_of
from webhooks.delivery.netguard import Resolver, TargetPolicy, check_host

#: Every kind, in the order the docs name them.
KINDS: tuple[Kind, ...] = (http.KIND, rabbitmq.KIND, redis_streams.KIND, mailto.KIND)
#: The kind of each scheme.
BY_SCHEME: dict[str, Kind] = {scheme: kind for kind in KINDS for scheme in kind.schemes}
#: Every URL the API accepts for an endpoint: any kind's pattern.
URL_PATTERN = "|".join(f"(?:{kind.pattern})" for kind in KINDS)


def _schemes_in_words() -> str:
    schemes = list(BY_SCHEME)
    return schemes[0] if len(schemes) == 1 else f"{', '.join(schemes[:-1])} or {schemes[-1]}"


def kind_of(url: str) -> Kind:
    """The kind ``url`` names by its scheme, or ValueError naming the schemes there are."""
    scheme = scheme_of(url)
    kind = BY_SCHEME.get(scheme)
    if kind is None:
        raise ValueError(f"URL scheme must be {_schemes_in_words()}, not {scheme or 'missing'!r}")
    return kind


def split_target(url: str) -> tuple[str, str, int]:
    """``(scheme, host, port)`` of an endpoint URL of any kind; ValueError naming what is wrong."""
    return kind_of(url).split(url)


def check_target(url: str, policy: TargetPolicy, resolver: Resolver | None = None) -> None:
    """Registration-time check of an endpoint URL of any kind: well-formed, and its host allowed by ``policy``.

    Raises ValueError (malformed, unknown scheme), UnresolvableHost or BlockedAddress, as
    ``netguard.check_url`` does for HTTP.
    """
    kind = kind_of(url)
    _, host, port = kind.split(url)
    if kind.reaches_host:
        check_host(host, port, policy, resolver)
