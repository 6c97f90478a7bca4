"""/v1/api-keys: the tenant's named API keys: list, create, revoke, and rotate with an overlap."""

from __future__ import annotations

from typing import Any, NoReturn

from flask.views import MethodView
from flask_smorest import abort

from webhooks.ingest import auth_keys
from webhooks.api.common import current_tenant
from webhooks.api.parsing import Blueprint
from webhooks.api.auth import require_tenant
from webhooks.storage.db import write
from webhooks.durations import parse_seconds
from webhooks.storage.models import ApiKey
from webhooks.api.key_schemas import (
    ApiKeyCreatedSchema, ApiKeyCreateSchema, ApiKeyListSchema, ApiKeyRotatedSchema, ApiKeyRotateSchema, ApiKeySchema,
)

blp = Blueprint("api_keys", __name__, url_prefix="/v1/api-keys",
                description="API keys: several per tenant, rotated without downtime")
blp.before_request(require_tenant)


def _not_found(error: auth_keys.KeyNotFound) -> NoReturn:
    abort(404, message="API key not found")


def _created(row: ApiKey, api_key: str) -> ApiKey:
    row.api_key = api_key  # type: ignore[attr-defined]
    return row


@blp.route("")
class ApiKeys(MethodView):
    @blp.response(200, ApiKeyListSchema)
    def get(self) -> dict[str, Any]:
        """The tenant's live keys (expiring ones included), with when each was created and last used."""
        return {"data": auth_keys.live_keys(current_tenant())}

    @blp.arguments(ApiKeyCreateSchema)
    @blp.response(201, ApiKeyCreatedSchema)
    def post(self, data: dict[str, Any]) -> ApiKey:
        """Issue another key. The whole key is in this answer only: store it now."""
        with write():
            return _created(*auth_keys.create_api_key(current_tenant(), data["name"]))


@blp.route("/<key_id>")
class ApiKeyItem(MethodView):
    @blp.response(200, ApiKeySchema)
    def get(self, key_id: str) -> ApiKey:
        """One live key (never its secret)."""
        try:
            return auth_keys.live_key(current_tenant(), key_id)
        except auth_keys.KeyNotFound as error:
            _not_found(error)

    @blp.response(204)
    def delete(self, key_id: str) -> None:
        """Revoke a key now. Web processes that verified it in the last `API_KEY_CACHE_SECONDS`
        (5 s by default) may accept it that much longer."""
        try:
            with write():
                auth_keys.revoke_key(current_tenant(), key_id)
        except auth_keys.KeyNotFound as error:
            _not_found(error)


@blp.route("/<key_id>/rotate")
class ApiKeyRotate(MethodView):
    @blp.arguments(ApiKeyRotateSchema, required=False)
    @blp.response(201, ApiKeyRotatedSchema)
    def post(self, data: dict[str, Any], key_id: str) -> ApiKey:
        """Issue a new key with the same name; the old one keeps working for `overlap`, then expires by itself."""
        try:
            with write():
                rotation = auth_keys.rotate_key(current_tenant(), key_id, parse_seconds(data["overlap"]))
        except auth_keys.KeyNotFound as error:
            _not_found(error)
        new = _created(rotation.new, rotation.api_key)
        new.replaced = rotation.old[0]  # type: ignore[attr-defined]
        return new
