"""The tree a filter compiles to (``webhooks.catalog.filters``): each node matches a value, and
explains a mismatch; the operators' tests, with JSON's equality (``true`` is not ``1``).

``filter_code`` turns the same tree into one Python function per filter, for fan-out.
"""

from __future__ import annotations

import json
from typing import Any, Callable

#: A field that is not there (``null`` is a value).
MISSING: Any = object()


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def same(a: Any, b: Any) -> bool:
    """JSON equality: ``true`` is not ``1`` (as Python has it), ``1`` is ``1.0``."""
    if is_number(a) and is_number(b):
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
        if is_number(value) and is_number(operand) or isinstance(value, str) and isinstance(operand, str):
            return test(value, operand)
        return False
    return compare


#: Each operator: its test of ``(value, operand)``, and the operand types it takes (as a check and a phrase).
OPERATORS: dict[str, tuple[Callable[[Any, Any], bool], Callable[[Any], bool], str]] = {
    "$eq": (_equal, lambda o: True, "any JSON value"),
    "$neq": (lambda v, o: v is not MISSING and not _equal(v, o), lambda o: True, "any JSON value"),
    "$gt": (_ordered(lambda v, o: v > o), lambda o: is_number(o) or isinstance(o, str), "a number or a string"),
    "$gte": (_ordered(lambda v, o: v >= o), lambda o: is_number(o) or isinstance(o, str), "a number or a string"),
    "$lt": (_ordered(lambda v, o: v < o), lambda o: is_number(o) or isinstance(o, str), "a number or a string"),
    "$lte": (_ordered(lambda v, o: v <= o), lambda o: is_number(o) or isinstance(o, str), "a number or a string"),
    "$in": (_within, lambda o: isinstance(o, (list, str)), "an array or a string"),
    "$nin": (lambda v, o: v is not MISSING and not _within(v, o), lambda o: isinstance(o, (list, str)),
             "an array or a string"),
    "$startsWith": (lambda v, o: isinstance(v, str) and v.startswith(o), lambda o: isinstance(o, str), "a string"),
    "$endsWith": (lambda v, o: isinstance(v, str) and v.endswith(o), lambda o: isinstance(o, str), "a string"),
    "$exist": (lambda v, o: (v is not MISSING) == o, lambda o: isinstance(o, bool), "true or false"),
}

#: Operators that combine conditions.
LOGICAL = ("$and", "$or", "$not")


def shown(value: Any) -> str:
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
        return f"{self.path}: {{{json.dumps(self.name)}: {shown(self.operand)}}} does not hold; the value is {shown(value)}"


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
        return None if self.matches(value) else f"{self.path or 'the event'}: the condition under $not matches (value {shown(value)})"


class Equal(Operator):
    """A plain value: ``$eq``, explained as an expected value."""

    def __init__(self, path: str, operand: Any) -> None:
        super().__init__(path, "$eq", operand)

    def explain(self, value: Any) -> str | None:
        if self.matches(value):
            return None
        return f"{self.path}: expected {shown(self.operand)}, the value is {shown(value)}"
