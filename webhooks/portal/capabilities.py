"""What a portal session may do, as Svix names it: ``view`` always, the rest as its link granted."""

from __future__ import annotations

from collections.abc import Iterable

from webhooks.errors import InvalidInput

VIEW = "view"
MANAGE_ENDPOINTS = "manage_endpoints"
VIEW_SECRETS = "view_secrets"
ROTATE_SECRETS = "rotate_secrets"
RESEND = "resend"

#: Every capability, in the order pages and errors list them.
ALL = (VIEW, MANAGE_ENDPOINTS, VIEW_SECRETS, ROTATE_SECRETS, RESEND)

#: What each lets a customer do (the portal's own words, and the API's documentation).
MEANING = {
    VIEW: "see endpoints, events and attempts",
    MANAGE_ENDPOINTS: "create, edit, disable, enable and delete endpoints, and send test events",
    VIEW_SECRETS: "reveal an endpoint's signing secret",
    ROTATE_SECRETS: "rotate an endpoint's signing secret",
    RESEND: "resend a delivery and recover an endpoint's failed deliveries",
}


class UnknownCapability(InvalidInput):
    """A capability that does not exist; ``field`` names the request field, ``names`` the unknown ones."""

    field = "capabilities"

    def __init__(self, names: list[str]) -> None:
        self.names = names
        super().__init__(f"unknown capabilit{'y' if len(names) == 1 else 'ies'} {', '.join(map(repr, names))}; "
                         f"the capabilities are {', '.join(ALL)}")


def granted(requested: Iterable[str] | None) -> tuple[str, ...]:
    """The capabilities a link gives: every one when none is named, else those named plus ``view``,
    in ``ALL``'s order. UnknownCapability for a name that is not one."""
    if requested is None:
        return ALL
    names = list(requested)
    unknown = [name for name in names if not isinstance(name, str) or name not in ALL]
    if unknown:
        raise UnknownCapability([str(name) for name in unknown])
    chosen = set(names) | {VIEW}
    return tuple(name for name in ALL if name in chosen)
