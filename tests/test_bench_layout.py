"""The benchmark's layout: shared pieces below the steps, the report above them, one entry point on top.

``bench/kit/`` (processes, services, the receiver and load programs, the stack, the cluster,
statistics) < ``bench/peers/`` (the contenders' programs) < ``bench/steps/`` (one module per step,
none importing another) and ``bench/drills/`` (the fault drills) < ``bench/report.py`` < the one entry
point, ``bench/run.py``. Imports point only down that order, and never in a circle.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench"

#: Each part's place; a module may import from its own place or a lower one.
ORDER = {"kit": 0, "peers": 1, "steps": 2, "drills": 2, "report": 3, "top": 4}

#: Modules that run as programs of their own (``if __name__ == "__main__"``): the entry point,
#: and the programs the steps start as processes.
PROGRAMS = {"bench.run", "bench.kit.receiver", "bench.kit.loadgen", "bench.kit.otlp_sink",
            "bench.peers.async_floor", "bench.peers.floor", "bench.peers.preload"}


def module_of(path: pathlib.Path) -> str:
    return ".".join(("bench", *path.relative_to(BENCH).with_suffix("").parts)).removesuffix(".__init__")


MODULES = {module_of(path): path for path in sorted(BENCH.rglob("*.py")) if ".venv" not in path.parts}


def place(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 2 and parts[1] in ("kit", "peers", "steps", "drills"):
        return parts[1]
    if module in ("bench.kit", "bench.peers", "bench.steps", "bench.drills"):
        return parts[1]
    return "report" if module == "bench.report" else "top"


def imports(module: str) -> set[str]:
    """The ``bench`` modules a module imports (``from bench.kit import services`` counts as ``bench.kit.services``)."""
    found = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "bench":
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in MODULES else node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "bench"}
    return found & MODULES.keys()


def test_every_import_points_down() -> None:
    upward = [f"{module} imports {target}" for module in MODULES for target in sorted(imports(module))
              if ORDER[place(target)] > ORDER[place(module)]]

    assert upward == []


@pytest.mark.parametrize("part", ["steps", "drills"])
def test_no_step_or_drill_imports_another(part: str) -> None:
    modules = {module for module in MODULES if place(module) == part and module != f"bench.{part}"}
    between = [f"{module} imports {target}" for module in sorted(modules)
               for target in sorted(imports(module) & {m for m in MODULES if place(m) in ("steps", "drills")})]

    assert between == []


def test_every_mode_of_the_entry_point_is_a_module_with_its_options_and_main() -> None:
    from bench.run import MODES, parse_args

    for mode, module in MODES.items():
        assert module in MODULES, mode
        assert parse_args([mode, "url"] if mode == "cluster" else [mode]).mode == mode


def test_a_mistyped_mode_is_refused_before_the_benchmarks_virtualenv_is_made(monkeypatch: pytest.MonkeyPatch,
                                                                             capsys: pytest.CaptureFixture[str]) -> None:
    import bench.run

    monkeypatch.setattr(bench.run, "bootstrap", lambda: pytest.fail("bench/.venv made for a mistyped mode"))
    monkeypatch.setattr("sys.argv", ["bench/run.py", "chaso", "--quick"])
    assert bench.run.main() == 2
    assert "no mode 'chaso'" in capsys.readouterr().err


def test_no_module_imports_itself_through_others() -> None:
    graph = {module: imports(module) - {module} for module in MODULES}
    circles = []
    for start in graph:
        seen, stack = set(), [(start, (start,))]
        while stack:
            module, path = stack.pop()
            for target in graph[module]:
                if target == start:
                    circles.append(" -> ".join((*path, start)))
                elif target not in seen:
                    seen.add(target)
                    stack.append((target, (*path, target)))

    assert circles == []


def test_only_the_entry_point_and_the_programs_the_steps_start_run_on_their_own() -> None:
    def runs_on_its_own(path: pathlib.Path) -> bool:
        return any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)
                   for node in ast.parse(path.read_text()).body)

    assert {module for module, path in MODULES.items() if runs_on_its_own(path)} == PROGRAMS


@pytest.mark.parametrize("module", sorted(MODULES), ids=str)
def test_every_module_says_what_it_does(module: str) -> None:
    assert ast.get_docstring(ast.parse(MODULES[module].read_text())), f"{module} has no docstring"


def test_every_step_module_is_registered_and_every_step_name_is_unique() -> None:
    from bench.steps import STEPS

    registered = {step.run.__module__ for step in STEPS}
    modules = {module for module in MODULES if place(module) == "steps" and module != "bench.steps"}

    assert registered == modules
    assert len({step.name for step in STEPS}) == len(STEPS)
