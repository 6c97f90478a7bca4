"""Step ``catalog``: batch ingestion with 100 event types with schemas and 100 endpoint filters against the same
without them (issue 33: at most 10 % fewer events/s), on three stacks (``SIDES``) whose runs alternate, each after
the previous run's deliveries are all published, so that what else the machine does weighs on every side alike;
the figure is each side's median events/s. Afterwards each stack must have one delivery per event (the filters let
nothing through), all published.
"""

from __future__ import annotations

import json
import tempfile
from contextlib import ExitStack
from typing import Any

from bench.kit.markdown import Add, n, section_of, verdict
from bench.kit.payload import PAYLOAD, batch_request
from bench.kit.procs import Deadline, log
from bench.kit.stack import ServiceStack, running
from bench.kit.step import Context, Results, Step

#: Types, schemas and filtered endpoints (the issue's figure).
TYPES = 100
FILTERS = 100

#: Events per request; rounds (each side runs once a round) and events per run, full and ``--quick``.
BATCH = 100
ROUNDS, QUICK_ROUNDS, COUNT, QUICK_COUNT = 5, 2, 30_000, 5_000

#: The issue's bound on the loss.
MAX_LOSS = 0.10

#: Keep-alive connections per load process, load processes (as step ``ingest``).
CONNECTIONS, PROCESSES = 2, 2

#: ``INGEST_RATE_LIMIT`` of the stacks: high, so that it never refuses.
RATE_LIMIT = "1000000"

TYPE_NAMES = [f"bench.type.{i:03d}" for i in range(TYPES)]

#: What every type's payload must be: the order of ``bench/kit/payload.py``, checked in depth.
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["order"],
    "properties": {"order": {
        "type": "object",
        "required": ["id", "customer", "amount", "currency", "lines"],
        "properties": {
            "id": {"type": "string", "pattern": "^ord_[A-Z0-9]+$"},
            "customer": {"type": "object", "required": ["id", "email"], "properties": {
                "id": {"type": "string", "pattern": "^cus_"}, "email": {"type": "string", "format": "email"},
                "country": {"type": "string", "minLength": 2, "maxLength": 2}}},
            "amount": {"type": "integer", "minimum": 0},
            "currency": {"enum": ["EUR", "USD", "GBP"]},
            "lines": {"type": "array", "minItems": 1, "maxItems": 500, "items": {
                "type": "object", "required": ["sku", "qty", "unit_amount"], "additionalProperties": False,
                "properties": {"sku": {"type": "string", "pattern": "^sku-[0-9]{4}$"},
                               "qty": {"type": "integer", "minimum": 1},
                               "unit_amount": {"type": "integer", "minimum": 0}}}},
            "shipping": {"type": "object", "properties": {
                "method": {"enum": ["standard", "express"]}, "street": {"type": "string"},
                "city": {"type": "string"}, "postcode": {"type": "string"}}},
        },
    }},
}


#: The catalog ``flask event-types import`` loads: ``TYPES`` types, each with the schema and an example.
CATALOG = {"event_types": [{"name": name, "description": f"Benchmark type {i}.", "group": "bench", "schema": SCHEMA,
                            "examples": [PAYLOAD]} for i, name in enumerate(TYPE_NAMES)]}


def never_matching_filter(i: int) -> dict[str, Any]:
    """A filter on the payload that fails for the benchmark's order (no country is ``X<i>``)."""
    return {"data": {"order": {"amount": {"$gte": 100}, "currency": {"$in": ["EUR", "USD"]},
                               "customer": {"country": f"X{i}"}}}}


def range_filter(i: int) -> dict[str, Any]:
    """A filter with no equality to index on (evaluated for every event), that fails for the benchmark's order."""
    return {"data": {"order": {"amount": {"$gte": 100, "$lt": 4000 - i}, "currency": {"$in": ["EUR", "USD"]}}}}


#: Each side: whether its types are in the catalog, and its 100 other endpoints' fields (by index).
SIDES: dict[str, tuple[bool, Any]] = {
    "baseline": (False, lambda i: {"event_types": ["never.sent"]}),
    "catalog": (True, lambda i: {"filter": never_matching_filter(i)}),
    "catalog, range filters": (True, lambda i: {"filter": range_filter(i)}),
}


def _prepare(stack: ServiceStack, with_catalog: bool, fields_of: Any) -> str:
    """The tenant's key, after its endpoints (and, ``with_catalog``, the catalog) are set up."""
    tenant = stack.tenant("bench")
    stack.endpoint(tenant, "http://127.0.0.1:9/every")
    for i in range(FILTERS):
        stack.endpoint(tenant, f"http://127.0.0.1:9/e{i}", **fields_of(i))
    if with_catalog:
        with tempfile.NamedTemporaryFile("w", prefix="bench-catalog-", suffix=".json") as catalog:
            json.dump(CATALOG, catalog)
            catalog.flush()
            stack.flask("event-types", "import", catalog.name)
    return tenant.api_key


def catalog(context: Context, deadline: Deadline) -> Results:
    rounds, count = (QUICK_ROUNDS, QUICK_COUNT) if context.plan.quick else (ROUNDS, COUNT)
    body = batch_request(TYPE_NAMES[:BATCH])
    # 101 endpoints: one over the default MAX_ENDPOINTS_PER_TENANT (100).
    env = {"INGEST_RATE_LIMIT": RATE_LIMIT, "MAX_ENDPOINTS_PER_TENANT": "0"}
    with ExitStack() as stacks:
        sides = {}
        for number, (name, (with_catalog, fields_of)) in enumerate(SIDES.items()):
            stack = stacks.enter_context(running(f"catalog{number}", env, remove=True))
            sides[name] = (stack, _prepare(stack, with_catalog, fields_of))
        for name, (stack, key) in sides.items():  # warm-up: connections, prepared statements, validators
            stack.burst(key, body, 20 * BATCH, CONNECTIONS, PROCESSES, BATCH)
            stack.wait_published()
        rates: dict[str, list[float]] = {name: [] for name in sides}
        for round_no in range(rounds):
            for name, (stack, key) in sides.items():
                deadline.check()
                result = stack.burst(key, body, count, CONNECTIONS, PROCESSES, BATCH)
                stack.wait_published()  # its deliveries published before the next side runs: no overlap
                rates[name].append(result["rps"])
                log(f"   round {round_no + 1} {name}: {result['count']} events in {result['seconds']:.2f} s = "
                    f"{result['rps']:,.0f} events/s, statuses {result['statuses']}")
        checks = {name: stack.ingestion_check() for name, (stack, _) in sides.items()}
    medians = {name: sorted(values)[len(values) // 2] for name, values in rates.items()}
    losses = {name: 1 - medians[name] / medians["baseline"] for name in SIDES if name != "baseline"}
    log("   median events/s: " + ", ".join(f"{name} {rate:,.0f}" for name, rate in medians.items()) + "; fewer: "
        + ", ".join(f"{name} {100 * loss:.1f} %" for name, loss in losses.items()))
    return {"rates": rates, "medians": medians, "losses": losses, "count": count, "rounds": rounds,
            "checks": checks, "service_overrides": env}


@section_of("catalog", "Ingestion with 100 schemas and 100 filters (`bench/steps/catalog.py`)")
def section(step: dict[str, Any], r: dict[str, Any], add: Add) -> None:
    add(f"`POST /v1/events/batch`, {BATCH} events of {TYPES} types a request, {n(step['count'])} events a run, "
        f"the two sides alternating over {step['rounds']} rounds, each on its own stack (gunicorn, 2 workers, "
        "no delivery worker). `baseline`: no catalog, 101 endpoints (100 subscribed to a type never sent). "
        f"`catalog`: the {TYPES} types with schemas, {FILTERS} endpoints with a filter that never matches, each "
        "with an equality (a look-up in the filters' index per event), and one that takes every event. "
        "`catalog, range filters`: the same with filters that have no equality to index on (`$gte`, `$lt`, "
        "`$in`), so each is evaluated for every event.")
    add("")
    add("| side | events/s (median) | each round | fewer than the baseline | deliveries |")
    add("|---|---|---|---|---|")
    for name in step["medians"]:
        check = step["checks"][name]
        loss = step["losses"].get(name)
        against = "–" if loss is None else \
            f"{100 * loss:.1f} % (target ≤ {100 * MAX_LOSS:.0f} %: {verdict(loss <= MAX_LOSS)})"
        add(f"| {name} | **{n(step['medians'][name])}** | {', '.join(n(x) for x in step['rates'][name])} | "
            f"{against} | {check['deliveries']:,} for {check['events']:,} events |")
    add("")


STEP = Step("catalog", "ingestion with schemas and filters", catalog, lambda context: 600 * context.budget,
            (section,), full_run=False)
