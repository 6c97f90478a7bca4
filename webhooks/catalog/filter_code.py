"""A filter's tree (``filter_nodes``) as one Python function, for fan-out: the same answers as the
tree's ``matches``, several times faster (no call per node; plain types tested inline).

The source is built from the tree, never from the filter's text: keys and scalar operands enter
it as ``repr`` of a ``str``, ``int``, ``float``, ``bool`` or ``None`` (Python literals), every
other operand as a bound name, and the tests that are not inlined are the tree's own functions.
A tree too deep for Python's parser keeps the tree's ``matches`` (``function_of`` says None).
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Callable

from webhooks.catalog.filter_nodes import MISSING, OPERATORS, AllOf, AnyOf, Field, Node, Not, Operator, is_number

#: Comparison operators inlined for number and string operands.
_COMPARISONS = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


class _Source:
    """The function's text and the names it uses."""

    def __init__(self) -> None:
        self.names: dict[str, Any] = {"_MISSING": MISSING, "_NUMBER": (int, float)}
        self.helpers: list[str] = []
        self._counter = itertools.count()

    def fresh(self, stem: str) -> str:
        return f"{stem}{next(self._counter)}"

    def bind(self, value: Any) -> str:
        name = self.fresh("_b")
        self.names[name] = value
        return name

    def expression(self, node: Node, value: str) -> str:
        """A Python expression: does ``node`` match the value held in the variable ``value``?"""
        if isinstance(node, Field):
            held = self.fresh("v")
            lookup = f"({value}.get({node.key!r}, _MISSING) if {value}.__class__ is dict else _MISSING)"
            # ``(x := …).__class__`` is always true: it only names the field's value for what follows.
            return f"(({held} := {lookup}).__class__ and {self.expression(node.node, held)})"
        if isinstance(node, AllOf):
            conjunction = " and ".join(self.expression(child, value) for child in node.nodes) or "True"
            if not node.of_fields:
                return f"({conjunction})"
            # Applied to an array, an object of fields matches if one element does: a helper per element.
            helper = self.fresh("_g")
            each = " and ".join(self.expression(child, "v") for child in node.nodes) or "True"
            self.helpers.append(f"def {helper}(v):\n    return bool({each})")
            return f"(any({helper}(x) for x in {value}) if {value}.__class__ is list else ({conjunction}))"
        if isinstance(node, AnyOf):
            return "(" + " or ".join(self.expression(child, value) for child in node.nodes) + ")"
        if isinstance(node, Not):
            return f"(not {self.expression(node.node, value)})"
        if isinstance(node, Operator):
            return self._operator(node, value)
        raise TypeError(f"unknown node {type(node).__name__}")

    def _operator(self, node: Operator, value: str) -> str:
        operand = node.operand
        if node.name in _COMPARISONS and is_number(operand) and math.isfinite(operand):
            return f"({value}.__class__ in _NUMBER and {value} {_COMPARISONS[node.name]} {operand!r})"
        if node.name in _COMPARISONS and isinstance(operand, str):
            return f"({value}.__class__ is str and {value} {_COMPARISONS[node.name]} {operand!r})"
        if node.name == "$eq" and isinstance(operand, str):
            # Only a string equals a string; in a list, ``in`` compares with == alike.
            return (f"({value} == {operand!r} if {value}.__class__ is str "
                    f"else ({value}.__class__ is list and {operand!r} in {value}))")
        if node.name in ("$in", "$nin") and isinstance(operand, list) and operand \
                and all(isinstance(o, str) for o in operand):
            strings = self.bind(frozenset(operand))
            within = (f"({value} in {strings} if {value}.__class__ is str else ({value}.__class__ is list and "
                      f"any(x.__class__ is str and x in {strings} for x in {value})))")
            return within if node.name == "$in" else f"({value} is not _MISSING and not {within})"
        if node.name == "$startsWith":
            return f"({value}.__class__ is str and {value}.startswith({operand!r}))"
        if node.name == "$endsWith":
            return f"({value}.__class__ is str and {value}.endswith({operand!r}))"
        if node.name == "$exist":
            return f"({value} is {'not ' if operand else ''}_MISSING)"
        return f"{self.bind(OPERATORS[node.name][0])}({value}, {self.bind(operand)})"


def function_of(root: Node) -> Callable[[Any], bool] | None:
    """``root.matches`` as one compiled function, or None when Python cannot compile it (too deep)."""
    source = _Source()
    try:
        body = source.expression(root, "event")
        text = "\n".join([*source.helpers, f"def _matches(event):\n    return bool({body})"])
        namespace = dict(source.names)
        exec(compile(text, "<filter>", "exec"), namespace)  # noqa: S102 - built from the tree, see the docstring
    except (SyntaxError, RecursionError, MemoryError):
        return None
    return namespace["_matches"]  # type: ignore[no-any-return]
