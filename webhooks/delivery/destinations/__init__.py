"""Destinations: where a delivery goes, named by its endpoint URL's scheme.

``base`` is the interface (``Destination``, ``Parcel``, ``Kind``); ``kinds`` lists the kinds
by scheme and checks a URL where it is registered (its pattern, its host through the SSRF
guard); ``router.Destinations`` is what the engine calls. One module per kind: ``http``
(``http://``, ``https://``, through ``sender``), ``rabbitmq`` (``amqp://``, ``amqps://``: a
confirmed publish to an exchange), ``redis_streams`` (``redis://``, ``rediss://``: XADD to a
stream), ``mailto`` (``mailto:``: an email through the operator's ``SMTP_URL``, composed by
``mail_message``); ``kept`` holds their connections per destination and closes idle ones.
"""

from webhooks.delivery.destinations.base import Destination, Kind, Parcel
from webhooks.delivery.destinations.kinds import URL_PATTERN, check_target, kind_of, split_target
from webhooks.delivery.destinations.router import Destinations

__all__ = ["Destination", "Destinations", "Kind", "Parcel", "URL_PATTERN", "check_target", "kind_of", "split_target"]
