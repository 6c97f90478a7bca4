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
matches an event only against the filters whose equality it meets.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Callable, Iterable, Mapping

#: The event's fields a filter may name at its top level.
EVENT_FIELDS = ("id", "type", "time", "data")

#: Conditions (fields, operators, plain values) one filter may hold at most.
MAX_CONDITIONS = 256

#: A field that is not there (``null`` is a value).
MISSING: Any = object()


class FilterError(ValueError):
    """A filter that cannot be used: ``path`` is where (``data.amount.$gte``), the message says why."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path or 'filter'}: {message}")
        self.path, self.message = path, message


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def same(a: Any, b: Any) -> bool:
    """JSON equality: ``true`` is not ``1`` (as Python has it), ``1`` is ``1.0``."""
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _equal(value: Any, operand: Any) -> bool:
    if value is MISSING:
        return False
    if same(value, operand):
        return True
    return isinstance(value, list) and not isinstance(operand, list) and any(same(v, operand) for v in value)


def _within(value: Any, operand: Any) -> bool:
    if value is MISSING:
        return False
    if isinstance(operand, str):
        return isinstance(value, str) and operand in value
    if isinstance(value, list):
        return any(_within(v, operand) for v in value)
    return any(same(value, o) for o in operand)


def _ordered(test: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool]:
    def compare(value: Any, operand: Any) -> bool:
        if _is_number(value) and _is_number(operand) or isinstance(value, str) and isinstance(operand, str):
            return test(value, operand)
        return False
    return compare


#: Each operator: its test of ``(value, operand)``, and the operand types it takes (as a check and a phrase).
OPERATORS: dict[str, tuple[Callable[[Any, Any], bool], Callable[[Any], bool], str]] = {
    "$eq": (_equal, lambda o: True, "any JSON value"),
    "$neq": (lambda v, o: v is not MISSING and not _equal(v, o), lambda o: True, "any JSON value"),
    "$gt": (_ordered(lambda v, o: v > o), lambda o: _is_number(o) or isinstance(o, str), "a number or a string"),
    "$gte": (_ordered(lambda v, o: v >= o), lambda o: _is_number(o) or isinstance(o, str), "a number or a string"),
    "$lt": (_ordered(lambda v, o: v < o), lambda o: _is_number(o) or isinstance(o, str), "a number or a string"),
    "$lte": (_ordered(lambda v, o: v <= o), lambda o: _is_number(o) or isinstance(o, str), "a number or a string"),
    "$in": (_within, lambda o: isinstance(o, (list, str)), "an array or a string"),
    "$nin": (lambda v, o: v is not MISSING and not _within(v, o), lambda o: isinstance(o, (list, str)),
             "an array or a string"),
    "$startsWith": (lambda v, o: isinstance(v, str) and v.startswith(o), lambda o: isinstance(o, str), "a string"),
    "$endsWith": (lambda v, o: isinstance(v, str) and v.endswith(o), lambda o: isinstance(o, str), "a string"),
    "$exist": (lambda v, o: (v is not MISSING) == o, lambda o: isinstance(o, bool), "true or false"),
}

#: Operators that combine conditions.
LOGICAL = ("$and", "$or", "$not")


def _shown(value: Any) -> str:
    return "missing" if value is MISSING else json.dumps(value)[:200]


# --- the compiled tree: each node matches a value, and explains a mismatch --------------------


class Node:
    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path

    def matches(self, value: Any) -> bool:
        raise NotImplementedError

    def explain(self, value: Any) -> str | None:
        """None when ``value`` matches, else a sentence naming the condition that failed."""
        raise NotImplementedError


class Operator(Node):
    __slots__ = ("name", "operand", "test")

    def __init__(self, path: str, name: str, operand: Any) -> None:
        super().__init__(path)
        self.name, self.operand, self.test = name, operand, OPERATORS[name][0]

    def matches(self, value: Any) -> bool:
        return self.test(value, self.operand)

    def explain(self, value: Any) -> str | None:
        if self.test(value, self.operand):
            return None
        return f"{self.path}: {{{json.dumps(self.name)}: {_shown(self.operand)}}} does not hold; the value is {_shown(value)}"


class Field(Node):
    __slots__ = ("key", "node")

    def __init__(self, path: str, key: str, node: Node) -> None:
        super().__init__(path)
        self.key, self.node = key, node

    def matches(self, value: Any) -> bool:
        return self.node.matches(value.get(self.key, MISSING) if isinstance(value, dict) else MISSING)

    def explain(self, value: Any) -> str | None:
        return self.node.explain(value.get(self.key, MISSING) if isinstance(value, dict) else MISSING)


class AllOf(Node):
    """An object's conditions, or ``$and``. An object of fields applied to an array: one element matches it."""

    __slots__ = ("nodes", "of_fields")

    def __init__(self, path: str, nodes: list[Node], of_fields: bool) -> None:
        super().__init__(path)
        self.nodes, self.of_fields = nodes, of_fields

    def matches(self, value: Any) -> bool:
        if self.of_fields and isinstance(value, list):
            return any(self.matches(element) for element in value)
        for node in self.nodes:
            if not node.matches(value):
                return False
        return True

    def explain(self, value: Any) -> str | None:
        if self.of_fields and isinstance(value, list):
            if self.matches(value):
                return None
            first = f"; the first: {self.explain(value[0])}" if value else ""
            return f"{self.path or 'the event'}: no element of the array matches{first}"
        for node in self.nodes:
            why = node.explain(value)
            if why is not None:
                return why
        return None


class AnyOf(Node):
    __slots__ = ("nodes",)

    def __init__(self, path: str, nodes: list[Node]) -> None:
        super().__init__(path)
        self.nodes = nodes

    def matches(self, value: Any) -> bool:
        for node in self.nodes:
            if node.matches(value):
                return True
        return False

    def explain(self, value: Any) -> str | None:
        if self.matches(value):
            return None
        reasons = "; ".join(f"[{i}] {node.explain(value)}" for i, node in enumerate(self.nodes))
        return f"{self.path}: none of the {len(self.nodes)} conditions matches ({reasons})"


class Not(Node):
    __slots__ = ("node",)

    def __init__(self, path: str, node: Node) -> None:
        super().__init__(path)
        self.node = node

    def matches(self, value: Any) -> bool:
        return not self.node.matches(value)

    def explain(self, value: Any) -> str | None:
        return None if self.matches(value) else f"{self.path or 'the event'}: the condition under $not matches (value {_shown(value)})"


class Equal(Operator):
    """A plain value: ``$eq``, explained as an expected value."""

    def __init__(self, path: str, operand: Any) -> None:
        super().__init__(path, "$eq", operand)

    def explain(self, value: Any) -> str | None:
        if self.matches(value):
            return None
        return f"{self.path}: expected {_shown(self.operand)}, the value is {_shown(value)}"


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
                    raise FilterError(here, f"takes {phrase}, not {_shown(operand)}")
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

    __slots__ = ("root", "spec")

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.root = _Compiler().conditions(spec, "", top=True)

    def matches(self, event: Mapping[str, Any]) -> bool:
        return self.root.matches(event)

    def explain(self, event: Mapping[str, Any]) -> str | None:
        """None when ``event`` matches, else which condition failed and what the value was."""
        return self.root.explain(event)


# --- many filters against one event: an index on their equalities ------------------------------


def _scalar_key(value: Any) -> tuple[str, Any] | None:
    """A dict key under which JSON-equal scalars meet (``same``): ``true`` apart from ``1``, ``1`` with ``1.0``."""
    if isinstance(value, bool):
        return ("bool", value)
    if _is_number(value):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if value is None:
        return ("null", None)
    return None


def necessary_equality(node: Node, path: tuple[str, ...] = ()) -> tuple[tuple[str, ...], tuple[str, Any]] | None:
    """One ``(path, value)`` every event the filter matches has: a plain scalar (or ``$eq``) reached only
    through fields and conjunctions (never under ``$or`` or ``$not``). None when the filter has none."""
    if isinstance(node, Field):
        return necessary_equality(node.node, (*path, node.key))
    if isinstance(node, AllOf):
        for child in node.nodes:
            found = necessary_equality(child, path)
            if found is not None:
                return found
        return None
    if isinstance(node, Operator) and node.name == "$eq" and path:
        key = _scalar_key(node.operand)
        return None if key is None else (path, key)
    return None


#: ``_values_at``'s answer when the path crosses an array: every filter on that path stays a candidate.
_ANY = object()


def _values_at(event: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The scalar keys at ``path`` (an array there: its elements), ``_ANY`` when an array lies on the way."""
    value: Any = event
    for key in path:
        if isinstance(value, dict):
            value = value.get(key, MISSING)
        elif isinstance(value, list):
            return _ANY
        else:
            return ()
    if value is MISSING:
        return ()
    if isinstance(value, list):
        return [key for key in map(_scalar_key, value) if key is not None]
    key = _scalar_key(value)
    return () if key is None else (key,)


class FilterIndex:
    """The filters of many endpoints, indexed on one necessary equality each, so that an event is matched
    only against the filters it can pass: with 100 endpoints each filtering on its own customer, an event
    costs one look-up, not 100 evaluations. Filters without an equality are always evaluated."""

    __slots__ = ("_paths", "_always")

    def __init__(self, filters: Iterable[tuple[str, Filter]]) -> None:
        self._paths: dict[tuple[str, ...], dict[tuple[str, Any], set[str]]] = {}
        self._always: set[str] = set()
        for key, compiled_filter in filters:
            found = necessary_equality(compiled_filter.root)
            if found is None:
                self._always.add(key)
            else:
                path, value = found
                self._paths.setdefault(path, {}).setdefault(value, set()).add(key)

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
