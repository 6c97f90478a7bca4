"""The service's exceptions form one hierarchy, drawn in ``webhooks/errors.py``'s docstring."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import webhooks
from webhooks import errors


def exception_classes() -> dict[str, type[BaseException]]:
    """Every public exception class defined in the package, by ``module.Class`` (without ``webhooks.``)."""
    found: dict[str, type[BaseException]] = {}
    for module_info in pkgutil.walk_packages(webhooks.__path__, "webhooks."):
        module = importlib.import_module(module_info.name)
        for name, value in vars(module).items():
            if (inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.__name__
                    and not name.startswith("_")):
                found[f"{module.__name__.removeprefix('webhooks.')}.{name}"] = value
    return found


def test_every_exception_of_the_service_derives_from_webhooks_error_and_is_drawn_in_the_tree() -> None:
    classes = exception_classes()
    assert len(classes) > 20
    outside = [name for name, cls in classes.items() if not issubclass(cls, errors.WebhooksError)]
    assert outside == [], "derive these from a base in webhooks/errors.py"
    tree = errors.__doc__ or ""
    undrawn = [name for name in classes
               if name not in tree and not name.startswith("errors.") and name.rsplit(".", 1)[1] not in tree]
    assert undrawn == [], "draw these in webhooks/errors.py's docstring"


def test_the_broker_being_down_is_one_kind_of_error() -> None:
    from webhooks.actions import BrokerUnavailable
    from webhooks.console.stats import DepthsUnavailable
    from webhooks.delivery.broker import MissingQueue, SessionClosed
    from webhooks.messaging.publisher import BatchFailed, LinkBroken, PublishError

    for cls in (BrokerUnavailable, DepthsUnavailable, SessionClosed, MissingQueue, PublishError, LinkBroken, BatchFailed):
        assert issubclass(cls, errors.BrokerError), cls


def test_refused_input_stays_a_value_error_and_what_is_not_found_a_lookup_error() -> None:
    assert issubclass(errors.InvalidInput, ValueError) and issubclass(errors.NotFound, LookupError)
