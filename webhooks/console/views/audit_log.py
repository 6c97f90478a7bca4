"""The audit log page: every operator action, newest first, optionally for one actor."""

from __future__ import annotations

from flask import render_template, request

from webhooks.console import audit
from webhooks.console.blueprint import bp
from webhooks.console.models import AuditEntry
from webhooks.console.queries import page, row_id_cursor


@bp.route("/audit")
def audit_log() -> str:
    actor = request.args.get("actor", "").strip()
    query = audit.entries(AuditEntry.actor == actor) if actor else audit.entries()
    before = request.args.get("before")
    results = page(query, AuditEntry.id, row_id_cursor(before))
    return render_template("console/audit.html", results=results, actor=actor)
