"""Schemathesis against ``/openapi.json``: no 5xx, and every answer is documented (status, type and schema).

Bounded for ``.ci/run``: a fixed number of derandomized examples per operation, positive and negative.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable

import pytest
import schemathesis
from flask import Flask
from flask.testing import FlaskClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests.api_helpers import HOOK_URL, create_endpoint, make_attempt, post_event

#: Examples per operation (positive and negative together).
MAX_EXAMPLES = 25



def status_code_listed(ctx: Any, response: Any, case: Any) -> None:
    """Stricter than ``status_code_conformance``: the status is listed itself, not only covered by ``default``."""
    listed = set(case.operation.definition.raw["responses"]) - {"default"}
    if str(response.status_code) not in listed:
        raise AssertionError(f"{response.status_code} is not documented for {case.operation.label}: {sorted(listed)}")


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    status_code_listed,
    content_type_conformance,
    response_schema_conformance,
]


def only_loopback(case: Any) -> None:
    """Point every well-formed URL the fuzzer wants to register at ``HOOK_URL`` (loopback, nothing listens)."""
    body = case.body
    if isinstance(body, dict) and isinstance(body.get("url"), str) and body["url"].startswith(("http://", "https://")):
        body["url"] = HOOK_URL


def real_ids(client: FlaskClient, headers: dict[str, str]) -> dict[str, str]:
    """Path parameters naming real objects of the tenant: a v1a endpoint, an event, a delivery with an attempt."""
    endpoint = create_endpoint(client, headers, signature_scheme="v1a")
    event = post_event(client, headers).json
    delivery = event["deliveries"][0]["id"]
    make_attempt(delivery, 1)
    return {"endpoint_id": endpoint["id"], "event_id": event["id"], "delivery_id": delivery}


def cases(operation: Any, ids: dict[str, str]) -> st.SearchStrategy[Any]:
    """Positive and negative cases, with generated path ids or the real ones."""
    names = {parameter.name for parameter in operation.path_parameters}
    fixed = {name: value for name, value in ids.items() if name in names}
    strategies = [operation.as_strategy(generation_mode=mode) for mode in GenerationMode]
    if fixed:
        strategies += [operation.as_strategy(generation_mode=mode, path_parameters=fixed) for mode in GenerationMode]
    return st.one_of(strategies)


def test_every_operation_answers_as_documented_and_never_5xx(
    app: Flask,
    client: FlaskClient,
    tenant: SimpleNamespace,
    auth: Callable[[SimpleNamespace], dict[str, str]],
    subtests: pytest.Subtests,
) -> None:
    # A real tenant key and real RabbitMQ (POST /v1/events publishes to the test prefix); no worker runs, so
    # nothing registered is ever called. Path ids are generated (404s) or real, so success bodies are checked
    # too. One subtest per operation: schemathesis' pytest loader ``from_fixture`` fails under pytest 9.
    headers = auth(tenant)
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app)
    ids = real_ids(client, headers)
    # DELETE last, so the other operations still find the real endpoint.
    operations = sorted((result.ok() for result in schema.get_all_operations()), key=lambda op: op.method == "delete")
    assert len(operations) >= 18

    for operation in operations:

        @settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        @given(case=cases(operation, ids))
        def answers_as_documented(case: Any) -> None:
            only_loopback(case)
            case.call_and_validate(headers=headers, checks=CHECKS)

        with subtests.test(msg=f"{operation.method.upper()} {operation.path}"):
            answers_as_documented()
