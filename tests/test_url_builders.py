"""The suite's apps share werkzeug's URL builders (``tests/url_builders.py``): every route builds
the URL its own freshly compiled builder builds, and a second app compiles none again."""

from __future__ import annotations

from typing import Callable

from flask import Flask
from werkzeug.routing.rules import Rule


def sample(rule: Rule, name: str) -> str:
    """A value the argument's converter takes: one of an ``any``'s words, else a number."""
    items = getattr(rule._converters[name], "items", None)
    return sorted(items)[0] if items else "7"


def test_every_route_builds_the_url_its_own_builder_builds(app: Flask) -> None:
    own_builder = Rule._compile_builder.original  # type: ignore[attr-defined]
    rules = list(app.url_map.iter_rules())

    for rule in rules:
        values = {name: sample(rule, name) for name in rule.arguments}
        for append_unknown, built in ((False, rule._build), (True, rule._build_unknown)):
            assert built(**values) == own_builder(rule, append_unknown).__get__(rule, None)(**values), rule.rule
    assert len(rules) > 100


def test_a_second_app_reuses_the_first_ones_builders(app: Flask, make_app: Callable[..., Flask]) -> None:
    second = make_app()

    first_builders = {rule.endpoint: rule._build.__func__ for rule in app.url_map.iter_rules()}
    assert all(rule._build.__func__ is first_builders[rule.endpoint] for rule in second.url_map.iter_rules())
