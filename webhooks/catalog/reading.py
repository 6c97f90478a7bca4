"""The catalog as people read it, for the console's and the portal's pages: a payload schema as one
row per field (its path, type, whether it is required, its rules and description), and entries
listed under their groups."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol, Sequence, TypeVar

#: Nested levels shown at most (deeper fields stay in the JSON view).
MAX_DEPTH = 6

#: Keywords shown as a field's rules, in this order.
RULES = ("enum", "const", "format", "pattern", "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum",
         "minLength", "maxLength", "minItems", "maxItems", "uniqueItems", "multipleOf")


@dataclass(frozen=True)
class FieldRow:
    """One field of a payload schema."""

    path: str
    type: str
    required: bool
    rules: str
    description: str

    @property
    def depth(self) -> int:
        """How deep the field is nested (``customer.id`` and ``lines[].qty``: 1), for indenting it."""
        return self.path.replace("[]", "").count(".")

    @property
    def name(self) -> str:
        """The field's own name, the last part of its path (``id`` of ``customer.id``)."""
        return self.path.rpartition(".")[2]


def _type_of(schema: dict[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    if kind == "array" and isinstance(schema.get("items"), dict) and "type" in schema["items"]:
        return f"array of {_type_of(schema['items'])}"
    if kind is not None:
        return str(kind)
    if "enum" in schema or "const" in schema:
        return "one of"
    if "$ref" in schema:
        return f"see {schema['$ref']}"
    for combiner in ("oneOf", "anyOf", "allOf"):
        if combiner in schema:
            return combiner
    return "any"


def _rules(schema: dict[str, Any]) -> str:
    shown = []
    for keyword in RULES:
        if keyword in schema:
            shown.append(f"{keyword} {json.dumps(schema[keyword], ensure_ascii=False)}")
    return "; ".join(shown)


def field_rows(schema: Any) -> list[FieldRow]:
    """The fields of ``schema`` (properties, nested objects, array items as ``[]``), depth first."""
    rows: list[FieldRow] = []

    def walk(node: Any, prefix: str, depth: int) -> None:
        if not isinstance(node, dict) or depth > MAX_DEPTH:
            return
        required = set(node.get("required", [])) if isinstance(node.get("required"), list) else set()
        properties = node.get("properties")
        if isinstance(properties, dict):
            for name, child in properties.items():
                path = f"{prefix}.{name}" if prefix else name
                child = child if isinstance(child, dict) else {}
                rows.append(FieldRow(path, _type_of(child), name in required, _rules(child),
                                     str(child.get("description", ""))))
                walk(child, path, depth + 1)
        items = node.get("items")
        if isinstance(items, dict) and (items.get("properties") or items.get("items")):
            walk(items, f"{prefix}[]", depth + 1)

    walk(schema, "", 0)
    return rows


#: The heading of the types that have no group (listed after the groups; no group name has a space).
UNGROUPED = "Other types"


class Grouped(Protocol):
    @property
    def group(self) -> str | None: ...


G = TypeVar("G", bound=Grouped)


def by_group(entries: Sequence[G]) -> list[tuple[str, list[G]]]:
    """``entries`` under their groups' names, the groups by name and the types without one last
    (under ``UNGROUPED``); each group's entries keep their order."""
    groups: dict[str | None, list[G]] = {}
    for entry in entries:
        groups.setdefault(entry.group, []).append(entry)
    ordered = sorted(groups.items(), key=lambda item: (item[0] is None, item[0] or ""))
    return [(name if name is not None else UNGROUPED, members) for name, members in ordered]
