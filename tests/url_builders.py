"""The suite's apps share werkzeug's URL builders: one compiled per route, not per app.

Every test makes an app of its own (``create_app``), and werkzeug compiles two Python
functions for each of its 131 routes (``Rule._compile_builder``): a third of the 0.16 s
of CPU an app takes, paid some 2,500 times a run. A builder depends only on its rule's
text, its parsed parts, its defaults and its converters' types, so the first app's
builder serves every later app's identical rule. The functions are werkzeug's own,
unchanged; only the compiling is done once. The service makes its app once a process
and is not touched.
"""

from __future__ import annotations

from typing import Any, Callable

from werkzeug.routing.rules import Rule

_compiled: dict[tuple[Any, ...], Callable[..., tuple[str, str]]] = {}


def reuse_url_builders() -> None:
    """Make ``Rule._compile_builder`` compile each distinct rule once per test process."""
    compile_builder = Rule._compile_builder
    if getattr(compile_builder, "reused", False):
        return

    def reused(self: Rule, append_unknown: bool = True) -> Callable[..., tuple[str, str]]:
        key = (self.rule, tuple(self._trace), tuple(sorted((self.defaults or {}).items())), append_unknown,
               tuple(sorted((name, type(converter)) for name, converter in self._converters.items())))
        builder = _compiled.get(key)
        if builder is None:
            builder = _compiled[key] = compile_builder(self, append_unknown)
        return builder

    reused.reused = True  # type: ignore[attr-defined]
    reused.original = compile_builder  # type: ignore[attr-defined]
    Rule._compile_builder = reused  # type: ignore[method-assign]
