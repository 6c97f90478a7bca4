"""The service's exceptions: one hierarchy, so a caller can catch a kind of failure by its base.

The bases live here; each exception is defined beside the code that raises it, and derives
from one of them (``tests/test_errors.py`` holds every exception class of the package to this
tree). Errors from libraries (pika, peewee, aiohttp) are mapped into these where the service
says something about them; control-flow signals private to one module are not part of it.

    WebhooksError
    ├── BrokerError                     the broker could not be used
    │   ├── actions.BrokerUnavailable         a resend or recover could not be queued
    │   ├── console.stats.DepthsUnavailable   queue depths could not be read
    │   ├── delivery.broker.SessionClosed     the worker's connection or a channel closed
    │   │   └── delivery.broker.MissingQueue    a queue of the ladder does not exist
    │   ├── messaging.publisher.PublishError  the broker refused a publish (nacked, or no such queue)
    │   ├── messaging.publisher.LinkBroken    the connection closed, or confirms timed out
    │   └── messaging.publisher.BatchFailed   some messages of a batch were not confirmed
    ├── InvalidInput (also ValueError)  input the service refuses: the message names the problem
    │   ├── actions.EndpointLimitReached
    │   ├── api.parsing.RefusedJson           (also json.JSONDecodeError)
    │   ├── catalog.files.CatalogFileError
    │   ├── catalog.filters.FilterError
    │   ├── catalog.mail_templates.RenderError  an email template that does not compile or render
    │   ├── catalog.registry.EventsRejected
    │   ├── catalog.schemas.InvalidSchema
    │   ├── catalog.store.BuiltIn
    │   ├── catalog.store.CatalogProblem
    │   ├── catalog.store.EventTypeExists
    │   ├── console.auth.StaffError
    │   ├── console.queries.FilterError
    │   ├── health.probes.NotProbed
    │   ├── ingest.accept.BatchOverRateLimit
    │   ├── ingest.accept.ReservedEventType
    │   ├── messaging.brokers.BrokerUrlError
    │   ├── messaging.messages.PoisonMessage
    │   ├── portal.access.AccessError
    │   ├── tenants.TenantTaken               a live tenant has that name or uid already
    │   └── portal.capabilities.UnknownCapability
    ├── NotFound (also LookupError)     what was named does not exist (any more)
    │   ├── catalog.examples.NoExample
    │   ├── catalog.store.UnknownEventType
    │   ├── ingest.accept.UnknownTenant
    │   └── ingest.auth_keys.KeyNotFound
    ├── Refused                         well-formed, but not now or not like this
    │   ├── api.body_limit.BodyTooLarge       (also werkzeug's RequestEntityTooLarge: a 413)
    │   ├── cli.TenantNameTaken               (also click.ClickException)
    │   ├── listen.ApiKeyRejected             (also click.ClickException)
    │   ├── ingest.accept.RateLimited
    │   ├── ingest.idempotency.IdempotencyConflict
    │   ├── portal.access.LinkRefused
    │   └── svix.wire.SvixError               (also werkzeug's HTTPException: a Svix API error answer)
    ├── BlockedAddress                  delivery.netguard: a URL's host may not be reached
    │   └── delivery.netguard.UnresolvableHost
    ├── MailError                       health.mailer: an email could not be sent
    ├── ApiUnavailable                  listen: the API could not be reached (worth retrying)
    ├── Declined                        api.fast_ingest: not a request the shortcut answers (Flask does)
    ├── SealError                       sealing: a stored secret that no key of SECRETS_KEY opens
    └── Stopping                        the process is stopping: give the work back
        ├── delivery.database_work.Stopping
        └── listen.Stopped

(``BlockedAddress``, ``MailError``, ``ApiUnavailable``, ``Declined`` and ``SealError`` are defined in their
modules and derive from ``WebhooksError`` directly.)
"""

from __future__ import annotations


class WebhooksError(Exception):
    """Every exception of the service."""


class BrokerError(WebhooksError):
    """RabbitMQ could not be used (down, refusing, or a queue missing)."""


class InvalidInput(WebhooksError, ValueError):
    """Input the service refuses; the message says what is wrong (a 4xx where it reaches a client)."""


class NotFound(WebhooksError, LookupError):
    """What was named does not exist (any more)."""


class Refused(WebhooksError):
    """A well-formed request refused: too fast, a conflicting repeat, a link that opens nothing."""


class Stopping(WebhooksError):
    """The process is stopping: the work in hand goes back."""
