"""Endpoint filters in Hookdeck Outpost's syntax: checked when written, compiled once, matched in microseconds.

A filter is matched against the event as ``{"id", "type", "time", "data"}`` (``data`` is
the payload, ``time`` its ISO 8601 creation time). An object holds conditions that must
all hold: a field name applies its value to that field, an operator to the value at hand.

- A plain value means equality; a field holding an array matches if the array contains it
  (``{"data": {"tags": "urgent"}}``). Objects nest (``{"data": {"customer": {"tier": "gold"}}}``);
  an object of fields applied to an array matches if one of its elements matches it.
- ``$eq`` ``$neq``: equality as above (``true`` is not ``1``). ``$gt`` ``$gte`` ``$lt`` ``$lte``:
  numbers with numbers, strings with strings (ISO 8601 times compare as text).
  ``$in`` ``$nin``: the value is in the array (an array value: one of its elements is), or
  with a string operand, the value is a string containing it. ``$startsWith`` ``$endsWith``:
  strings. ``$exist``: ``true`` when the field is there (``null`` counts), ``false`` when not.
- ``$and`` ``$or``: a non-empty array of conditions; ``$not``: one condition.
- A missing field, or a value of the wrong type for an operator, fails the operator:
  only ``{"$exist": false}`` matches a missing field, and ``$neq``/``$nin`` need the field
  to be there (``{"$not": {"$eq": x}}`` matches a missing field too).

``compile_filter`` checks a filter (``FilterError`` names the path of the first problem)
and returns a ``Filter`` whose ``matches`` is the fan-out's test and ``explain`` says which
condition failed (``POST /v1/endpoints/<id>/filter/test``). ``compiled`` caches them by the
stored text, so fan-out compiles each endpoint's filter once per process; ``FilterIndex``
matches an event only against the filters whose equality, or numeric range, it meets.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_left, bisect_right
from functools import lru_cache
from typing import Any, Callable, Iterable, Iterator, Mapping

from webhooks.errors import InvalidInput
from webhooks.catalog.filter_code import function_of
from webhooks.catalog.filter_nodes import (
    LOGICAL, MISSING, OPERATORS, AllOf, AnyOf, Equal, Field, Node, Not, Operator, is_number, shown,
)

#: The event's fields a filter may name at its top level.
EVENT_FIELDS = ("id", "type", "time", "data")

#: Conditions (fields, operators, plain values) one filter may hold at most.
MAX_CONDITIONS = 256

class FilterError(InvalidInput):
    """A filter that cannot be used: ``path`` is where (``data.amount.$gte``), the message says why."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path or 'filter'}: {message}")
        self.path, self.message = path, message


# --- compiling ---------------------------------------------------------------------------------


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class _Compiler:
    def __init__(self) -> None:
        self.count = 0

    def condition(self, spec: Any, path: str) -> Node:
        self.count += 1
        if self.count > MAX_CONDITIONS:
            raise FilterError(path, f"a filter holds at most {MAX_CONDITIONS} conditions")
        if not isinstance(spec, dict):
            return Equal(path, spec)
        return self.conditions(spec, path)

    def conditions(self, spec: Mapping[str, Any], path: str, top: bool = False) -> Node:
        nodes: list[Node] = []
        for key, operand in spec.items():
            here = _join(path, key)
            if key in ("$and", "$or"):
                if not isinstance(operand, list) or not operand:
                    raise FilterError(here, "must be a non-empty array of conditions")
                parts = [self.conditions(self._object(part, f"{here}[{i}]"), f"{here}[{i}]", top)
                         for i, part in enumerate(operand)]
                nodes.append(AllOf(here, parts, False) if key == "$and" else AnyOf(here, parts))
            elif key == "$not":
                nodes.append(Not(path, self.conditions(self._object(operand, here), here, top)))
            elif key in OPERATORS:
                if top:
                    raise FilterError(here, f"an operator applies to a field: name one of {', '.join(EVENT_FIELDS)}")
                accepts, phrase = OPERATORS[key][1], OPERATORS[key][2]
                if not accepts(operand):
                    raise FilterError(here, f"takes {phrase}, not {shown(operand)}")
                nodes.append(Operator(path, key, operand))
            elif key.startswith("$"):
                known = ", ".join((*OPERATORS, *LOGICAL))
                raise FilterError(here, f"unknown operator {key!r}: use one of {known}")
            elif top and key not in EVENT_FIELDS:
                raise FilterError(here, f"unknown field {key!r}: a filter matches the event's "
                                        f"{', '.join(EVENT_FIELDS)}")
            else:
                nodes.append(Field(here, key, self.condition(operand, here)))
        # An empty object is no condition: it holds for any value, even a missing one.
        of_fields = not top and any(isinstance(node, Field) for node in nodes)
        return nodes[0] if len(nodes) == 1 and not of_fields else AllOf(path, nodes, of_fields)

    @staticmethod
    def _object(spec: Any, path: str) -> Mapping[str, Any]:
        if not isinstance(spec, dict):
            raise FilterError(path, "must be an object of conditions")
        return spec


class Filter:
    """A compiled filter: ``matches(event)`` at fan-out, ``explain(event)`` for a person."""

    __slots__ = ("root", "spec", "matches", "equality", "range")

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.root = _Compiler().conditions(spec, "", top=True)
        #: What ``FilterIndex`` files it under (found once, not for every batch that routes with it).
        self.equality = necessary_equality(self.root)
        self.range = necessary_range(self.root) if self.equality is None else None
        #: Does ``event`` match? The tree as one Python function (``filter_code``), or the tree itself.
        self.matches: Callable[[Mapping[str, Any]], bool] = function_of(self.root) or self.root.matches

    def explain(self, event: Mapping[str, Any]) -> str | None:
        """None when ``event`` matches, else which condition failed and what the value was."""
        return self.root.explain(event)


# --- many filters against one event: an index on what each filter needs -------------------------


def _scalar_key(value: Any) -> tuple[str, Any] | None:
    """A dict key under which JSON-equal scalars meet (``same``): ``true`` apart from ``1``, ``1`` with ``1.0``."""
    if isinstance(value, bool):
        return ("bool", value)
    if is_number(value):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if value is None:
        return ("null", None)
    return None


def _conjuncts(node: Node, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Operator]]:
    """The operators every match must satisfy, with the path of the value each tests: those reached only
    through fields and conjunctions (never under ``$or`` or ``$not``)."""
    if isinstance(node, Field):
        yield from _conjuncts(node.node, (*path, node.key))
    elif isinstance(node, AllOf):
        for child in node.nodes:
            yield from _conjuncts(child, path)
    elif isinstance(node, Operator) and path:
        yield path, node


def necessary_equality(node: Node) -> tuple[tuple[str, ...], tuple[str, Any]] | None:
    """One ``(path, value)`` every event the filter matches has: a plain scalar (or ``$eq``) among its
    conjuncts. None when the filter has none."""
    for path, operator in _conjuncts(node):
        if operator.name == "$eq":
            key = _scalar_key(operator.operand)
            if key is not None:
                return path, key
    return None


#: A numeric range: ``(low, low is exclusive, high, high is exclusive)``.
Range = tuple[float, bool, float, bool]


def necessary_range(node: Node) -> tuple[tuple[str, ...], Range] | None:
    """The numbers the value at one path must lie between for the filter to match: its conjuncts'
    ``$gt`` ``$gte`` ``$lt`` ``$lte`` with number operands on the first path that has any (such an
    operator fails for anything but a number). None when the filter has none."""
    bounds: dict[tuple[str, ...], list[Operator]] = {}
    for path, operator in _conjuncts(node):
        if operator.name in ("$gt", "$gte", "$lt", "$lte") and is_number(operator.operand):
            bounds.setdefault(path, []).append(operator)
    if not bounds:
        return None
    path, operators = next(iter(bounds.items()))
    low, low_open, high, high_open = -math.inf, False, math.inf, False
    for operator in operators:
        value, strict = operator.operand, operator.name in ("$gt", "$lt")
        if operator.name in ("$gt", "$gte") and (value > low or value == low and strict):
            low, low_open = value, strict
        elif operator.name in ("$lt", "$lte") and (value < high or value == high and strict):
            high, high_open = value, strict
    return path, (low, low_open, high, high_open)


#: ``_value_at``'s answer when the path crosses an array: every filter on that path stays a candidate.
_ANY = object()


def _value_at(event: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The value at ``path`` (``MISSING`` if it is not there), or ``_ANY`` when an array lies on the way."""
    value: Any = event
    for key in path:
        if isinstance(value, dict):
            value = value.get(key, MISSING)
        elif isinstance(value, list):
            return _ANY
        else:
            return MISSING
    return value


def _values_at(event: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The scalar keys at ``path`` (an array there: its elements), ``_ANY`` when an array lies on the way."""
    value = _value_at(event, path)
    if value is _ANY or value is MISSING:
        return () if value is MISSING else _ANY
    if isinstance(value, list):
        return [key for key in map(_scalar_key, value) if key is not None]
    key = _scalar_key(value)
    return () if key is None else (key,)


class _Ranges:
    """The filters that need the number at one path within a range: which of them a number can pass,
    found by bisecting their low bounds and their high bounds and checking the shorter side."""

    __slots__ = ("_by_low", "_lows", "_by_high", "_highs")

    def __init__(self, entries: list[tuple[Range, str]]) -> None:
        self._by_low = sorted(entries, key=lambda entry: entry[0][0])
        self._lows = [entry[0][0] for entry in self._by_low]
        self._by_high = sorted(entries, key=lambda entry: entry[0][2])
        self._highs = [entry[0][2] for entry in self._by_high]

    def passing(self, number: float) -> list[str]:
        low_side = self._by_low[:bisect_right(self._lows, number)]  # low <= number
        high_side = self._by_high[bisect_left(self._highs, number):]  # high >= number
        side = low_side if len(low_side) <= len(high_side) else high_side
        return [key for (low, low_open, high, high_open), key in side
                if (low < number or low == number and not low_open) and (number < high or number == high and not high_open)]

    def every(self) -> list[str]:
        return [key for _, key in self._by_low]


class FilterIndex:
    """The filters of many endpoints, indexed on one thing each needs (an equality, else a numeric range),
    so that an event is matched only against the filters it can pass: with 100 endpoints each filtering
    on its own customer, or on its own band of amounts, an event costs a look-up or two bisections, not
    100 evaluations. Filters that need neither are always evaluated."""

    __slots__ = ("_paths", "_ranges", "_always")

    def __init__(self, filters: Iterable[tuple[str, Filter]]) -> None:
        self._paths: dict[tuple[str, ...], dict[tuple[str, Any], set[str]]] = {}
        self._always: set[str] = set()
        ranges: dict[tuple[str, ...], list[tuple[Range, str]]] = {}
        for key, compiled_filter in filters:
            if compiled_filter.equality is not None:
                path, value = compiled_filter.equality
                self._paths.setdefault(path, {}).setdefault(value, set()).add(key)
            elif compiled_filter.range is not None:
                path, bounds = compiled_filter.range
                ranges.setdefault(path, []).append((bounds, key))
            else:
                self._always.add(key)
        self._ranges = {path: _Ranges(entries) for path, entries in ranges.items()}

    def __bool__(self) -> bool:
        """Does it hold any filter?"""
        return bool(self._paths or self._ranges or self._always)

    def candidates(self, event: Mapping[str, Any]) -> set[str]:
        """The keys whose filters may match ``event`` (a superset of those that do)."""
        out = set(self._always)
        for path, buckets in self._paths.items():
            values = _values_at(event, path)
            if values is _ANY:
                for keys in buckets.values():
                    out |= keys
                continue
            for value in values:
                keys = buckets.get(value)
                if keys:
                    out |= keys
        for path, ranges in self._ranges.items():
            value = _value_at(event, path)
            if is_number(value):
                out.update(ranges.passing(value))
            elif value is _ANY:
                out.update(ranges.every())
        return out


def compile_filter(spec: Any) -> Filter | None:
    """The compiled filter (``FilterError`` when it cannot be used); None for ``{}`` or ``null`` (no filter)."""
    if spec is None or spec == {}:
        return None
    if not isinstance(spec, dict):
        raise FilterError("", "must be an object (or null to remove the filter)")
    return Filter(spec)


@lru_cache(maxsize=4096)
def compiled(text: str | None) -> Filter | None:
    """``compile_filter`` of a stored filter (its JSON text), once per process and text."""
    return None if text is None else compile_filter(json.loads(text))


def event_view(event_id: str, event_type: str, time: str, payload: Any) -> dict[str, Any]:
    """What a filter is matched against."""
    return {"id": event_id, "type": event_type, "time": time, "data": payload}


def openapi_schema(ref: str) -> dict[str, Any]:
    """The filter's shape as an OpenAPI 3.0 schema (``ref``: where this schema is, for ``$and``, ``$or``, ``$not``)."""
    condition = {"description": "A plain value (equality; an array contains it) or an object of conditions."}
    return {
        "type": "object",
        "additionalProperties": False,
        "description": "Only events matching this filter are delivered (Hookdeck Outpost's syntax), matched against "
                       "`{id, type, time, data}`; operators " + ", ".join(f"`{name}`" for name in (*OPERATORS, *LOGICAL))
                       + ". `{}` or null: no filter.",
        "properties": {
            **{name: condition for name in EVENT_FIELDS},
            "$and": {"type": "array", "minItems": 1, "items": {"$ref": ref}},
            "$or": {"type": "array", "minItems": 1, "items": {"$ref": ref}},
            "$not": {"$ref": ref},
        },
    }
