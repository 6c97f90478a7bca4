"""Dead letters (failed deliveries, from the database): filter, replay one, or replay all in the background."""

from __future__ import annotations

from flask import (
    abort,
    current_app,
    flash,
    g,
    redirect,
    render_template,
    request,
    url_for,
)
from werkzeug.wrappers import Response

from webhooks.console import audit, replay
from webhooks.console.auth import current_staff, operator_required
from webhooks.console.blueprint import bp
from webhooks.console.models import ReplayJob
from webhooks.console.queries import MAX_ROW_ID, DeliveryFilter, page, row_id_cursor
from webhooks.console.views.common import get_or_404, read_filter
from webhooks.storage.models import Delivery
from webhooks.storage.statuses import DeliveryStatus

#: Dead letters are the failed deliveries: the database is the list; the dead-letter queue
#: is a copy for operators, and a replay publishes a fresh attempt.
DEAD = {"statuses": (DeliveryStatus.FAILED,)}


@bp.route("/dead-letters")
def dead_letters() -> tuple[str, int]:
    filters, errors = read_filter(request.args, g.now, **DEAD)
    query = filters.query()
    return render_template(
        "console/dead_letters.html",
        filters=filters,
        errors=errors,
        results=page(query, Delivery.id, request.args.get("before")) if not errors else None,
        total=query.count() if not errors else 0,
        jobs=list(ReplayJob.select().order_by(ReplayJob.id.desc()).limit(5)),
    ), 400 if errors else 200


@bp.route("/dead-letters/replay", methods=["POST"])
@operator_required
def replay_all() -> Response:
    """Replay every dead letter matching the filter: a background job, its progress on its own page."""
    filters, errors = read_filter(request.form, g.now, **DEAD)
    if errors:
        abort(400, "; ".join(errors.values()))
    job = replay.create_job(filters, current_staff().email)
    audit.record(current_staff().email, "replay_all", "replay_job", str(job.id), filters=filters.describe(), total=job.total)
    if job.status == "queued":
        replay.run_in_background(current_app._get_current_object(), job.id)  # type: ignore[attr-defined]
    return redirect(url_for("console.replay_job", job_id=job.id), 303)


@bp.route("/replays")
def replay_jobs() -> str:
    before = request.args.get("before")
    results = page(ReplayJob.select(), ReplayJob.id, row_id_cursor(before))
    return render_template("console/replays.html", results=results)


@bp.route(f"/replays/<int(max={MAX_ROW_ID}):job_id>")
def replay_job(job_id: int) -> str:
    """The job's progress bar; the page refreshes itself while the job runs."""
    job = get_or_404(ReplayJob, job_id, "replay job")
    filters = DeliveryFilter.from_json(job.filters)
    return render_template("console/replay.html", job=job, stale=replay.is_stale(job), filters=filters)


@bp.route(f"/replays/<int(max={MAX_ROW_ID}):job_id>/resume", methods=["POST"])
@operator_required
def replay_resume(job_id: int) -> Response:
    """Carry on a job that failed or whose runner died; what it replayed already is skipped."""
    job = get_or_404(ReplayJob, job_id, "replay job")
    if job.status == "done" or (job.status == "running" and not replay.is_stale(job)):
        flash(f"Replay job {job.id} is {job.status}; nothing to resume.", "info")
    else:
        audit.record(current_staff().email, "replay_resume", "replay_job", str(job.id))
        replay.run_in_background(current_app._get_current_object(), job.id)  # type: ignore[attr-defined]
        flash(f"Replay job {job.id} resumed.", "success")
    return redirect(url_for("console.replay_job", job_id=job.id), 303)
