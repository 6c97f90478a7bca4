"""Endpoint filters (Outpost's syntax): every operator with its edge cases, the checks made when
one is written, and the explanation of a mismatch."""

from __future__ import annotations

from typing import Any

import pytest

from webhooks.catalog.filter_code import function_of
from webhooks.catalog.filters import FilterError, FilterIndex, compile_filter, compiled, event_view

EVENT = event_view("evt_1", "order.paid", "2026-11-26T12:00:00.000Z", {
    "amount": 150, "currency": "eur", "paid": True, "note": None, "email": "ann@example.com",
    "tags": ["urgent", "vip"], "customer": {"tier": "gold", "country": "FR"},
    "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-2", "qty": 1}],
})


def matches(spec: dict[str, Any], event: dict[str, Any] = EVENT) -> bool:
    compiled_filter = compile_filter(spec)
    assert compiled_filter is not None
    assert (compiled_filter.explain(event) is None) == compiled_filter.matches(event)  # the two agree
    return compiled_filter.matches(event)


@pytest.mark.parametrize("spec, expected", [
    ({"type": "order.paid"}, True),
    ({"type": "order.created"}, False),
    ({"data": {"currency": "eur", "amount": 150}}, True),
    ({"data": {"currency": "eur", "amount": 151}}, False),
    ({"data": {"customer": {"tier": "gold"}}}, True),
    ({"data": {"customer": {"tier": "silver"}}}, False),
    ({"data": {"tags": "vip"}}, True),  # an array matches if it contains the value
    ({"data": {"tags": "new"}}, False),
    ({"data": {"tags": ["urgent", "vip"]}}, True),  # an array value: the whole array
    ({"data": {"tags": ["vip"]}}, False),
    ({"data": {"items": {"sku": "B-2", "qty": 1}}}, True),  # an object against an array: one element matches
    ({"data": {"items": {"sku": "B-2", "qty": 2}}}, False),  # ... the same element
    ({"data": {"paid": True}}, True),
    ({"data": {"paid": 1}}, False),  # true is not 1
    ({"data": {"amount": 150.0}}, True),
    ({"data": {"note": None}}, True),  # null is a value
    ({"data": {"missing": None}}, False),  # a missing field is not null
    ({"data": {"amount": "150"}}, False),  # no coercion
])
def test_plain_values_mean_equality(spec: dict[str, Any], expected: bool) -> None:
    assert matches(spec) is expected


@pytest.mark.parametrize("condition, expected", [
    ({"$eq": 150}, True), ({"$eq": 149}, False),
    ({"$neq": 149}, True), ({"$neq": 150}, False),
    ({"$gt": 149}, True), ({"$gt": 150}, False),
    ({"$gte": 150}, True), ({"$gte": 151}, False),
    ({"$lt": 151}, True), ({"$lt": 150}, False),
    ({"$lte": 150}, True), ({"$lte": 149.5}, False),
    ({"$gte": 100, "$lt": 500}, True), ({"$gte": 100, "$lt": 150}, False),
    ({"$gt": "100"}, False),  # a number is not compared with a string
    ({"$in": [100, 150]}, True), ({"$in": [100]}, False), ({"$in": "150"}, False),
    ({"$nin": [100]}, True), ({"$nin": [150]}, False),
    ({"$exist": True}, True), ({"$exist": False}, False),
    ({"$not": {"$lt": 100}}, True), ({"$not": {"$gt": 100}}, False),
])
def test_operators_on_a_number(condition: dict[str, Any], expected: bool) -> None:
    assert matches({"data": {"amount": condition}}) is expected


@pytest.mark.parametrize("field, condition, expected", [
    ("email", {"$startsWith": "ann@"}, True), ("email", {"$startsWith": "bob@"}, False),
    ("email", {"$endsWith": "@example.com"}, True), ("email", {"$endsWith": ".org"}, False),
    ("amount", {"$startsWith": "1"}, False),  # not a string
    ("email", {"$in": "example"}, True),  # a string operand: the value contains it
    ("email", {"$in": "nope"}, False),
    ("currency", {"$in": ["eur", "usd"]}, True), ("currency", {"$nin": ["eur", "usd"]}, False),
    ("currency", {"$gt": "aaa"}, True), ("currency", {"$lt": "aaa"}, False),  # strings compare as text
    ("tags", {"$in": ["vip", "x"]}, True),  # an array value: one of its elements is in the operand
    ("tags", {"$nin": ["vip"]}, False),
    ("tags", {"$eq": "urgent"}, True), ("tags", {"$neq": "urgent"}, False),
    ("note", {"$exist": True}, True),  # null is there
    ("customer", {"$eq": {"country": "FR", "tier": "gold"}}, True),  # deep equality, any key order
])
def test_operators_on_strings_arrays_and_objects(field: str, condition: dict[str, Any], expected: bool) -> None:
    assert matches({"data": {field: condition}}) is expected


@pytest.mark.parametrize("condition, expected", [
    ({"$exist": False}, True),
    ({"$exist": True}, False),
    ({"$eq": None}, False),
    ({"$neq": 1}, False),  # $neq and $nin need the field to be there
    ({"$nin": [1]}, False),
    ({"$not": {"$eq": 1}}, True),
    ({"$gt": 0}, False),
    ({"sub": "x"}, False),
])
def test_a_missing_field_matches_only_exist_false_and_negations(condition: dict[str, Any], expected: bool) -> None:
    assert matches({"data": {"absent": condition}}) is expected


def test_a_field_under_a_value_that_is_no_object_is_missing() -> None:
    assert matches({"data": {"amount": {"cents": {"$exist": False}}}})
    assert not matches({"data": {"email": {"domain": "example.com"}}})


@pytest.mark.parametrize("spec, expected", [
    ({"$or": [{"data": {"currency": "usd"}}, {"data": {"amount": {"$gt": 100}}}]}, True),
    ({"$or": [{"data": {"currency": "usd"}}, {"type": "x"}]}, False),
    ({"$and": [{"data": {"currency": "eur"}}, {"data": {"amount": {"$gte": 100}}}]}, True),
    ({"$and": [{"data": {"currency": "eur"}}, {"data": {"amount": {"$gte": 1000}}}]}, False),
    ({"$not": {"type": "order.created"}}, True),
    ({"$not": {"$not": {"type": "order.paid"}}}, True),  # nested $not
    ({"data": {"currency": {"$not": {"$not": {"$in": ["usd"]}}}}}, False),
    ({"data": {"customer": {"$or": [{"tier": "silver"}, {"country": "FR"}]}}}, True),
    ({"data": {"status": {"$not": {"$in": ["cancelled", "refunded"]}}}}, True),  # missing: $in fails, $not holds
    ({"time": {"$gte": "2026-11-01T00:00:00Z", "$lt": "2026-12-01T00:00:00Z"}}, True),
    ({"time": {"$lt": "2026-11-01T00:00:00Z"}}, False),
    ({"id": {"$startsWith": "evt_"}}, True),
])
def test_logical_operators_and_the_event_fields(spec: dict[str, Any], expected: bool) -> None:
    assert matches(spec) is expected


@pytest.mark.parametrize("spec, path, says", [
    ({"data": {"amount": {"$gte": [1]}}}, "data.amount.$gte", "a number or a string"),
    ({"data": {"amount": {"$like": 1}}}, "data.amount.$like", "unknown operator"),
    ({"payload": {"a": 1}}, "payload", "unknown field"),
    ({"$gt": 1}, "$gt", "applies to a field"),
    ({"$or": []}, "$or", "non-empty array"),
    ({"$or": [{"data": {"a": 1}}, 3]}, "$or[1]", "object of conditions"),
    ({"data": {"a": {"$not": 1}}}, "data.a.$not", "object of conditions"),
    ({"data": {"a": {"$exist": "yes"}}}, "data.a.$exist", "true or false"),
    ({"data": {"a": {"$in": 3}}}, "data.a.$in", "an array or a string"),
    ({"data": {"a": {"$startsWith": 3}}}, "data.a.$startsWith", "a string"),
    ({"$and": [{"data": {"a": {"$bad": 1}}}]}, "$and[0].data.a.$bad", "unknown operator"),
])
def test_a_filter_that_cannot_be_used_is_refused_with_its_path(spec: dict[str, Any], path: str, says: str) -> None:
    with pytest.raises(FilterError) as raised:
        compile_filter(spec)
    assert raised.value.path == path
    assert says in raised.value.message


def test_an_empty_object_or_null_is_no_filter() -> None:
    assert compile_filter({}) is None
    assert matches({"data": {}}) and matches({"data": {"absent": {}}})  # an empty object holds for anything
    assert compile_filter(None) is None
    with pytest.raises(FilterError):
        compile_filter([{"type": "x"}])


def test_a_filter_is_bounded_in_size() -> None:
    with pytest.raises(FilterError, match="at most"):
        compile_filter({"data": {"tags": {"$or": [{"x": i} for i in range(300)]}}})


@pytest.mark.parametrize("spec, explanation", [
    ({"data": {"amount": {"$gte": 1000}}}, 'data.amount: {"$gte": 1000} does not hold; the value is 150'),
    ({"data": {"currency": "usd"}}, 'data.currency: expected "usd", the value is "eur"'),
    ({"data": {"absent": {"$exist": True}}}, 'data.absent: {"$exist": true} does not hold; the value is missing'),
    ({"type": {"$not": {"$eq": "order.paid"}}}, 'type: the condition under $not matches (value "order.paid")'),
])
def test_a_mismatch_is_explained_by_the_condition_that_failed(spec: dict[str, Any], explanation: str) -> None:
    compiled_filter = compile_filter(spec)
    assert compiled_filter is not None and compiled_filter.explain(EVENT) == explanation


def test_or_explains_each_of_its_conditions() -> None:
    compiled_filter = compile_filter({"$or": [{"type": "a"}, {"data": {"amount": {"$lt": 10}}}]})
    assert compiled_filter is not None
    assert compiled_filter.explain(EVENT) == (
        '$or: none of the 2 conditions matches ([0] $or[0].type: expected "a", the value is "order.paid"; '
        '[1] $or[1].data.amount: {"$lt": 10} does not hold; the value is 150)')


def test_a_stored_filter_is_compiled_once_per_process() -> None:
    text = '{"data":{"amount":{"$gt":1}}}'
    assert compiled(text) is compiled(text)
    assert compiled(None) is None


#: Filters of every kind, and events that meet some of them, for the index's tests.
INDEXED = {
    "paid": {"data": {"status": "paid"}},
    "vip": {"data": {"tags": "vip"}},
    "one": {"data": {"n": 1}},
    "true": {"data": {"n": True}},
    "eq-null": {"data": {"n": {"$eq": None}}},
    "item": {"data": {"items": {"sku": "A"}}},
    "and": {"$and": [{"type": "t"}, {"data": {"status": "paid"}}]},
    "or": {"$or": [{"data": {"status": "paid"}}, {"data": {"status": "new"}}]},
    "not": {"$not": {"data": {"status": "paid"}}},
    "range": {"data": {"amount": {"$gt": 10}}},
    "band": {"data": {"amount": {"$gte": 5, "$lt": 11}}},
    "closed band": {"data": {"amount": {"$gte": 5, "$lte": 5}}},
    "open band": {"data": {"amount": {"$gt": 5, "$lt": 12}, "n": {"$gt": 0.5}}},
    "nested range": {"data": {"items": {"price": {"$lte": 3}}}},
    "range in or": {"$or": [{"data": {"amount": {"$gt": 100}}}, {"data": {"status": "new"}}]},
    "range in not": {"$not": {"data": {"amount": {"$gt": 100}}}},
    "string range": {"data": {"status": {"$gte": "p"}}},
}
INDEX_EVENTS = [
    event_view("e", "t", "2026", payload) for payload in (
        {"status": "paid", "tags": ["vip", "x"], "n": 1.0, "items": [{"sku": "A"}], "amount": 11},
        {"status": "new", "tags": "vip", "n": True, "items": {"sku": "A"}},
        {"status": ["paid"], "n": None, "amount": 5},
        {"amount": 11.5, "n": 2, "items": [{"price": 3}, {"price": 9}]},
        {"amount": [6], "items": {"price": 2.5}},
        {"amount": True, "status": "z"},
        {},
    )
]


@pytest.mark.parametrize("event", INDEX_EVENTS)
def test_the_index_keeps_every_filter_that_matches_as_a_candidate(event: dict[str, Any]) -> None:
    filters = {name: compile_filter(spec) for name, spec in INDEXED.items()}
    index = FilterIndex((name, f) for name, f in filters.items() if f is not None)
    matching = {name for name, f in filters.items() if f is not None and f.matches(event)}
    assert matching <= index.candidates(event)


def test_the_index_leaves_out_filters_whose_equality_the_event_does_not_meet() -> None:
    filters = {f"customer-{i}": compile_filter({"data": {"customer": f"cus_{i}", "amount": {"$gt": 0}}})
               for i in range(100)}
    index = FilterIndex((name, f) for name, f in filters.items() if f is not None)
    assert index.candidates(event_view("e", "t", "x", {"customer": "cus_7", "amount": 5})) == {"customer-7"}
    assert index.candidates(event_view("e", "t", "x", {"customer": "nobody"})) == set()
    # Neither an equality nor a numeric range to index on: always a candidate.
    assert FilterIndex([("r", compile_filter({"data": {"a": {"$exist": False}}}))]).candidates({}) == {"r"}


def test_the_index_leaves_out_filters_whose_numeric_range_the_event_is_outside() -> None:
    filters = {f"band-{i}": compile_filter({"data": {"amount": {"$gte": 100 * i, "$lt": 100 * (i + 1)},
                                                     "currency": {"$in": ["EUR", "USD"]}}}) for i in range(100)}
    index = FilterIndex((name, f) for name, f in filters.items() if f is not None)
    view = lambda amount: event_view("e", "t", "x", {"amount": amount, "currency": "EUR"})  # noqa: E731
    assert index.candidates(view(250)) == {"band-2"}
    assert index.candidates(view(300)) == {"band-3"}  # $gte includes its bound, $lt excludes it
    assert index.candidates(view(10_000)) == set()  # above every band: nothing is evaluated
    assert index.candidates(view("250")) == set()  # a string never passes a range on numbers
    assert index.candidates(event_view("e", "t", "x", {"currency": "EUR"})) == set()  # nor a missing field
    crossing = event_view("e", "t", "x", [{"amount": 250}])  # an array on the way: every band may match
    assert index.candidates(crossing) == set(filters)


def test_fan_out_runs_each_filter_as_one_compiled_function_and_a_filter_too_deep_for_it_keeps_the_tree() -> None:
    shallow = compile_filter({"data": {"amount": {"$gt": 100}}})
    assert shallow is not None and shallow.matches is not shallow.root.matches
    spec: dict[str, Any] = {"type": "order.paid"}
    for _ in range(250):  # 250 nested $not: deeper than Python's parser goes
        spec = {"$not": spec}
    deep = compile_filter(spec)
    assert deep is not None and deep.matches(EVENT) is True and deep.explain(EVENT) is None
    assert function_of(deep.root) is None
