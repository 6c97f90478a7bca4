"""The overview: deliveries per status, queue depths, unhealthy endpoints, the oldest undelivered."""

from __future__ import annotations

from datetime import timedelta

from flask import current_app, g, render_template

from webhooks.console import audit, stats
from webhooks.console.blueprint import bp
from webhooks.console.models import AuditEntry, ReplayJob
from webhooks.console.queries import STATUSES
from webhooks.storage.models import Delivery

#: The windows of the status table: (label, ``since`` of the linked search, length).
WINDOWS = (("last hour", "1h", timedelta(hours=1)), ("last 24 hours", "24h", timedelta(hours=24)))


@bp.route("/")
def overview() -> str:
    settings = current_app.extensions["webhooks.settings"]
    counts = {
        since: stats.status_counts(Delivery.created_at >= g.now - length) for _, since, length in WINDOWS
    }
    try:
        depths, broker_error = stats.queue_depths(settings.amqp_url, settings.topology), None
    except stats.DepthsUnavailable as error:
        depths, broker_error = {}, str(error)
    topology = settings.topology
    return render_template(
        "console/overview.html",
        windows=WINDOWS,
        statuses=STATUSES,
        counts=counts,
        depths=depths,
        broker_error=broker_error,
        topology=topology,
        wait_queues=list(topology.wait_queues()),
        unhealthy=stats.unhealthy_endpoints(),
        oldest=stats.oldest_undelivered(),
        actions=list(audit.entries().order_by(AuditEntry.id.desc()).limit(5)),
        jobs=list(ReplayJob.select().where(ReplayJob.status != "done").order_by(ReplayJob.id.desc()).limit(5)),
    )
