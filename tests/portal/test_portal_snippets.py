"""The verification snippets: the Python one runs as shown and tells a signed request from a forged one."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest
from standardwebhooks import Webhook

from webhooks.delivery.signing import generate_key
from webhooks.portal.snippets import SNIPPETS


def test_the_python_snippet_verifies_a_signed_request_and_refuses_a_forged_one(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = generate_key("v1")
    monkeypatch.setenv("WEBHOOK_SECRET", secret)
    namespace: dict[str, object] = {}
    exec(SNIPPETS[0].code, namespace)  # noqa: S102 - the snippet as the page shows it
    body = json.dumps({"type": "order.created", "timestamp": "2026-11-26T10:00:00Z", "data": {"order": 1}}).encode()
    now = datetime.now(timezone.utc)
    headers = {"webhook-id": "evt_1", "webhook-timestamp": str(int(now.timestamp())),
               "webhook-signature": Webhook(secret).sign("evt_1", now, body.decode())}

    handle = namespace["handle"]
    assert handle(body, headers) == 204  # type: ignore[operator]
    assert handle(body.replace(b"1}", b"2}"), headers) == 400  # type: ignore[operator]


def test_every_language_reads_the_secret_from_the_environment_and_names_the_official_library() -> None:
    assert [s.language for s in SNIPPETS] == ["Python", "JavaScript", "Go", "Ruby", "PHP"]
    for snippet in SNIPPETS:
        assert "WEBHOOK_SECRET" in snippet.code and "whsec_" not in snippet.code.replace("whsec_…", "")
        assert "standard" in snippet.install.lower()
