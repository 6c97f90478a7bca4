"""Fuzzing every console route, as schemathesis does for the API (36.13): awkward text in every path
id, query parameter and form field (NUL, CR/LF, huge numbers, other scripts, markup), as a
signed-in operator with a valid CSRF token; no answer may be a 5xx.

Deterministic: hypothesis derandomized, no example database, a bounded number of examples. The
cases once found (a NUL in a search field or an id on PostgreSQL, a ``next`` with CR/LF) are
pinned as explicit examples.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from flask import Flask
from flask.testing import FlaskClient
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from werkzeug.routing import AnyConverter, IntegerConverter, Rule

from tests.console_helpers import csrf_of, failed_delivery, log_in
from webhooks.console import login_throttle, replay

#: Values that broke something once, or could: NUL, CR/LF, numbers past 64 bits, non-ASCII digits.
AWKWARD = ["", " ", "\x00", "a\x00b", "evt_\x00", "\r\n", "/console/\r\nSet-Cookie: x=1", "%00", "../../etc/passwd",
           "'; --", '"', "<script>alert(1)</script>", "𝔘𝔫𝔦", "²", "٣", "-1", "99999999999999999999999",
           "//evil.example/", "\\\\evil", "24h", "2026-13-45", "failed", "ten_x", "\t", "\u2028", "\ufeff"]

#: Query parameters and form fields the console reads.
FIELDS = ["q", "tenant", "endpoint_id", "event_type", "status", "since", "until", "before", "state", "actor",
          "next", "reason", "email", "password", "group", "cursor", "include_archived"]

#: Routes left out: logging out ends the session the run needs; static files are not the console's code.
LEFT_OUT = {"console.logout", "console.static", "pages.static"}

text = st.one_of(st.sampled_from(AWKWARD), st.text(max_size=30))
queries = st.dictionaries(st.sampled_from(FIELDS), text, max_size=4)


def console_rules(app: Flask) -> list[Rule]:
    return sorted((rule for rule in app.url_map.iter_rules()
                   if rule.endpoint.startswith(("console.", "pages.")) and rule.endpoint not in LEFT_OUT),
                  key=lambda rule: rule.rule)


def path_of(rule: Rule, values: dict[str, Any]) -> str:
    """The rule's path with ``values`` put in as they are (quoted), whether the converter would match or not."""
    path = rule.rule
    for name, converter in rule._converters.items():
        placeholder = next(part for part in path.split("<")[1:] if part.split(">")[0].split(":")[-1] == name)
        value = values[name]
        path = path.replace("<" + placeholder.split(">")[0] + ">", quote(str(value), safe="" if name != "unknown" else "/"))
    return path


@st.composite
def requests(draw: st.DrawFn, rules: list[Rule], real_ids: dict[str, str]) -> tuple[str, str, dict[str, str]]:
    """(method, path with query, form) for one console route."""
    rule = draw(st.sampled_from(rules))
    values: dict[str, Any] = {}
    for name, converter in rule._converters.items():
        if isinstance(converter, AnyConverter):
            values[name] = draw(st.sampled_from(sorted(converter.items)))
        elif isinstance(converter, IntegerConverter):
            values[name] = draw(st.integers(min_value=0, max_value=10**30))
        elif name in real_ids:
            values[name] = draw(st.one_of(st.just(real_ids[name]), text.filter(bool)))
        else:
            values[name] = draw(text.filter(bool))
    method = draw(st.sampled_from(sorted(rule.methods - {"HEAD", "OPTIONS"})))
    query = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in draw(queries).items())
    return method, path_of(rule, values) + (f"?{query}" if query else ""), draw(queries)


@pytest.fixture
def operator_client(client: FlaskClient, headers: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> FlaskClient:
    """A signed-in operator with a dead letter to act on; the login limits out of the way, and bulk
    replays run before the request returns (no thread left behind on the test's database)."""
    monkeypatch.setattr(login_throttle, "ACCOUNT_LIMIT", 10**6)
    monkeypatch.setattr(login_throttle, "ADDRESS_LIMIT", 10**6)
    monkeypatch.setattr(replay, "run_in_background",
                        lambda app, job_id: replay.run_job(job_id, app.extensions["webhooks.settings"]))
    client.dead = failed_delivery(client, headers)  # type: ignore[attr-defined]
    log_in(client, "operator")
    return client


def send(client: FlaskClient, method: str, path: str, form: dict[str, str]) -> int:
    data = {**form, "csrf_token": csrf_of(client)} if method == "POST" else None
    return client.open(path, method=method, data=data).status_code


def test_no_console_route_answers_5xx_whatever_it_is_sent(app: Flask, operator_client: FlaskClient) -> None:
    dead = operator_client.dead  # type: ignore[attr-defined]
    real_ids = {"endpoint_id": dead.endpoint_id, "event_id": dead.event_id, "delivery_id": dead.id}
    failures: dict[str, int] = {}

    @settings(max_examples=400, derandomize=True, database=None, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(requests(console_rules(app), real_ids))
    @example(("GET", "/console/search?q=a%00b", {}))
    @example(("GET", "/console/search?tenant=%00", {}))
    @example(("GET", "/console/events/evt_%00", {}))
    @example(("GET", "/console/endpoints?q=%00", {}))
    @example(("GET", "/console/audit?actor=%00", {}))
    @example(("GET", "/console/login?next=/console/%0D%0ASet-Cookie:%20x=1", {}))
    @example(("POST", "/console/login", {"email": "x@example.com", "password": "x", "next": "/console/\r\nx"}))
    @example(("POST", f"/console/endpoints/{dead.endpoint_id}/disable", {"reason": "a\x00b"}))
    @example(("GET", "/console/replays?before=²", {}))
    @example(("GET", "/console/replays/99999999999999999999999", {}))
    def run(request: tuple[str, str, dict[str, str]]) -> None:
        method, path, form = request
        status = send(operator_client, method, path, form)
        if status >= 500:
            failures.setdefault(f"{method} {path!r} {form!r}", status)

    run()

    assert failures == {}
