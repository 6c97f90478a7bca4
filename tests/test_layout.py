"""The package's layout: folders by stage of an event's path, imports only down the path; no test file imports another."""

from __future__ import annotations

import ast
import re
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "webhooks"

#: Each folder's place on the path; a module may import from its own place or an earlier one.
ORDER = {
    "helpers": 0,  # durations, logs, event_types, turns, errors: import nothing of ours
    "observability": 0,  # tracing: every stage makes spans; it imports only the helpers
    "storage": 1,
    "messaging": 2,
    "shared": 3,  # config, metrics: read by every stage, built on storage and messaging
    "catalog": 4,  # event types, their schemas, endpoint filters: what ingestion checks and routes by
    "ingest": 4,
    "health": 5,
    "delivery": 6,
    "services": 7,  # actions, readiness: what the API and the console both call
    "pages": 8,  # the page kit the console and the portal share
    "api": 9,
    "console": 9,
    "portal": 9,  # the customer portal: on the page kit, beside the console (whose audit log it writes)
    "platform": 9,  # tenants: the platform's customers, made by the API and the CLI; a delete ends their portal sessions
    "svix": 9,  # the Svix API at /api/v1: a translation layer onto the API's schemas, the platform and the services
    "top": 10,  # the entry points: app, web, worker, clock, cli, listen
}
HELPERS = {"durations", "logs", "event_types", "turns", "secrecy", "errors", "sealing", "instance_file"}
SHARED = {"config", "metrics"}
SERVICES = {"actions", "readiness"}
PLATFORM = {"tenants"}


def place(module: str) -> str:
    """The place of ``webhooks.x.y`` on the path."""
    parts = module.split(".")[1:]
    if not parts:
        return "top"
    if parts[0] in ORDER:
        return parts[0]
    for name, modules in (("helpers", HELPERS), ("shared", SHARED), ("services", SERVICES), ("platform", PLATFORM)):
        if parts[0] in modules:
            return name
    return "top"


def imports(path: pathlib.Path) -> set[str]:
    """Every ``webhooks…`` module the file imports (``from webhooks import x`` counts as ``webhooks.x``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "webhooks":
            if node.module == "webhooks":
                found |= {f"webhooks.{alias.name}" for alias in node.names}
            else:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "webhooks"}
    return found


def module_of(path: pathlib.Path) -> str:
    return ".".join(("webhooks", *path.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__")


def test_every_import_points_down_the_path() -> None:
    backwards = [
        f"{module_of(path)} imports {target}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for target in sorted(imports(path))
        if ORDER[place(target)] > ORDER[place(module_of(path))]
    ]

    assert backwards == []


def test_every_folder_says_what_its_stage_does_and_what_it_may_import() -> None:
    for folder in ORDER.keys() - {"helpers", "shared", "services", "platform", "top"}:
        doc = ast.get_docstring(ast.parse((PACKAGE / folder / "__init__.py").read_text())) or ""
        assert "May import" in doc, f"webhooks/{folder}/__init__.py does not say what it may import"


SQL_STATEMENT = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\s")


def sql_strings(path: pathlib.Path) -> list[str]:
    """String constants (f-string parts too) that start an SQL statement, docstrings left out."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
        and SQL_STATEMENT.match(node.value)
    ]


def test_hand_built_sql_lives_in_storage_beside_the_models_it_writes() -> None:
    elsewhere = [
        f"{module_of(path)}: {text[:40]!r}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).parts[0] != "storage"
        for text in sql_strings(path)
    ]

    assert elsewhere == []


TESTS = pathlib.Path(__file__).resolve().parent


def imported_test_modules(path: pathlib.Path) -> set[str]:
    """The test modules (``tests/…/test_*.py``, and a folder's ``conftest.py``: its fixtures are
    pytest's to load) a file imports from, by dotted name as written."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if not (node.level or module.split(".")[0] == "tests"):
                continue
            last = module.rpartition(".")[2]
            if last.startswith("test_") or (last == "conftest" and module != "tests.conftest"):
                found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names if alias.name.startswith("test_")}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names
                      if alias.name.split(".")[0] == "tests" and alias.name.rpartition(".")[2].startswith("test_")}
    return found


def test_no_file_of_the_tests_imports_from_a_test_module() -> None:
    """Shared fixtures live in conftest.py and plugin modules, shared helpers in helper modules
    (``tests/*_helpers.py``, ``tests/browser.py`` …): a test file is never another's library."""
    borrowing = [
        f"{path.relative_to(TESTS.parent)} imports {module}"
        for path in sorted(TESTS.rglob("*.py"))
        for module in sorted(imported_test_modules(path))
    ]

    assert borrowing == []
