"""The OpenAPI document describes both keys and every route of the platform: /v1/tenants and the tenant
routes under /v1/tenants/{tenant_ref}/ (schemathesis covers them: tests/api/test_openapi_fuzz.py)."""

from __future__ import annotations

from typing import Any

import pytest
from flask.testing import FlaskClient

METHODS = {"get", "post", "patch", "delete", "put"}


@pytest.fixture
def spec(client: FlaskClient) -> dict[str, Any]:
    return client.get("/openapi.json").json


def operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(path, method, op) for path, item in spec["paths"].items() for method, op in item.items() if method in METHODS]


def test_both_keys_are_documented_as_bearer_schemes(spec: dict[str, Any]) -> None:
    schemes = spec["components"]["securitySchemes"]

    assert schemes["bearerAuth"]["scheme"] == schemes["platformAuth"]["scheme"] == "bearer"
    assert "tenant" in schemes["bearerAuth"]["description"] and "platform" in schemes["platformAuth"]["description"]
    assert spec["security"] == [{"bearerAuth": []}]


def test_every_platform_route_takes_the_platform_key_and_documents_its_403(spec: dict[str, Any]) -> None:
    platform = [(p, m, op) for p, m, op in operations(spec) if p.startswith("/v1/tenants")]

    assert {(m, p) for p, m, _ in platform} >= {
        ("post", "/v1/tenants"), ("get", "/v1/tenants"), ("get", "/v1/tenants/{tenant_ref}"),
        ("patch", "/v1/tenants/{tenant_ref}"), ("delete", "/v1/tenants/{tenant_ref}"),
        ("post", "/v1/tenants/{tenant_ref}/portal-access"), ("delete", "/v1/tenants/{tenant_ref}/portal-sessions"),
    }
    for path, method, op in platform:
        assert op["security"] == [{"platformAuth": []}], (method, path)
        assert {"401", "403"} <= set(op["responses"]), (method, path)


def test_every_tenant_route_is_documented_a_second_time_under_the_tenants_prefix(spec: dict[str, Any]) -> None:
    # The event-type catalog is the platform's, one for every tenant: not a tenant route.
    plain = {(p, m) for p, m, _ in operations(spec)
             if p.startswith("/v1/") and not p.startswith(("/v1/tenants", "/v1/event-types"))}

    for path, method in plain:
        twin = path.replace("/v1/", "/v1/tenants/{tenant_ref}/", 1)
        assert method in spec["paths"][twin], (method, twin)
        (ref,) = [p for p in spec["paths"][twin]["parameters"] if p["name"] == "tenant_ref"]
        assert ref["in"] == "path" and "uid" in ref["description"]
        assert "404" in spec["paths"][twin][method]["responses"]


def test_the_catalog_is_read_with_either_key_and_written_with_the_platform_key(spec: dict[str, Any]) -> None:
    catalog = [(p, m, op) for p, m, op in operations(spec) if p.startswith("/v1/event-types")]

    assert {m for _, m, _ in catalog} == {"get", "post", "patch", "delete"}
    for path, method, op in catalog:
        expected = [{"bearerAuth": []}, {"platformAuth": []}] if method == "get" else [{"platformAuth": []}]
        assert op["security"] == expected, (method, path)
        assert {"401", "403"} <= set(op["responses"]), (method, path)
