"""What ``/v1/tenants`` takes and shows: a tenant's name, its ``uid`` and its metadata; portal access."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from webhooks.portal import access, capabilities as caps
from webhooks.api.fields import (
    CursorPageSchema,
    DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, STORABLE, UtcDateTime, cursor_field, metadata_field,
)

#: A tenant's uid: the platform's own id for its customer. Not ``ten_…``, so it never reads as
#: a tenant id (a path's ``<id or uid>`` is looked up as an id first).
UID_PATTERN = r"^(?!ten_)[A-Za-z0-9_.:-]{1,64}$(?!\n)"

UID = validate.Regexp(UID_PATTERN, error="must be 1 to 64 letters, digits, '_', '.', ':' or '-', not starting 'ten_'")

NAME = [validate.Length(1, 200), *STORABLE]


class TenantCreateSchema(Schema):
    name = fields.String(required=True, validate=NAME,
                         metadata={"description": "Unique among tenants, whatever its case."})
    uid = fields.String(allow_none=True, validate=UID, metadata={
        "description": "Your own id for this customer, unique; accepted in every path wherever a tenant id is."})
    metadata = metadata_field()


class TenantUpdateSchema(TenantCreateSchema):
    """Only the fields sent change; ``uid: null`` clears it, ``metadata`` is replaced whole."""

    name = fields.String(validate=NAME, metadata={"description": "Unique among tenants, whatever its case."})


class TenantSchema(Schema):
    id = fields.String(metadata={"description": "`ten_…`"})
    name = fields.String()
    uid = fields.String(allow_none=True)
    metadata = fields.Dict(keys=fields.String(), values=fields.String())
    created_at = UtcDateTime()


class TenantListArgsSchema(Schema):
    search = fields.String(validate=[validate.Length(1, 200), *STORABLE], metadata={
        "description": "Only tenants whose name or uid contains this text (any case)."})
    cursor = cursor_field("ten")
    limit = fields.Integer(load_default=DEFAULT_PAGE_SIZE, validate=validate.Range(1, MAX_PAGE_SIZE))


class TenantPageSchema(CursorPageSchema):
    data = fields.List(fields.Nested(TenantSchema), metadata={"description": "Oldest first."})


class PortalAccessSchema(Schema):
    capabilities = fields.List(
        fields.String(validate=validate.OneOf(caps.ALL, error="unknown capability {input!r}: the capabilities are "
                                                              + ", ".join(caps.ALL))),
        metadata={"description": "What the session may do: " + "; ".join(f"`{n}`: {m}" for n, m in caps.MEANING.items())
                                 + ". `view` is always given; absent means every capability."},
    )
    expires_in = fields.Integer(
        strict=True, validate=validate.Range(access.MIN_EXPIRES_IN, access.MAX_EXPIRES_IN),
        metadata={"description": f"Seconds the link may be opened in (once); {access.DEFAULT_EXPIRES_IN} by default."},
    )


class PortalLinkSchema(Schema):
    url = fields.String(metadata={"description": "The one-time link: opening it starts a portal session for the "
                                                 "tenant and goes to the portal. Hand it to your customer's browser."})
    expires_at = UtcDateTime(metadata={"description": "Opened after this, the link shows that it expired."})
    capabilities = fields.List(fields.String(), metadata={"description": "What the session may do."})


class PortalSessionsEndedSchema(Schema):
    ended = fields.Integer(metadata={"description": "Portal sessions of the tenant ended now."})
