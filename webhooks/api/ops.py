"""Operations routes (no tenant key): ``/healthz`` for load balancers and monitors."""

from __future__ import annotations

from flask.views import MethodView

from webhooks import readiness as health
from webhooks.api.parsing import Blueprint
from webhooks.api.schemas import HealthSchema

blp = Blueprint("ops", __name__, description="Operations")


@blp.route("/healthz")
class Health(MethodView):
    @blp.doc(security=[])
    @blp.response(200, HealthSchema)
    @blp.alt_response(503, schema=HealthSchema, description="The database is down")
    def get(self) -> tuple[dict[str, object], int]:
        """Database and broker status: 503 only when the database is down.

        A broker outage is `degraded` but still 200: events are accepted and relayed later.
        """
        database_ok, checks = health.check()
        if not database_ok:
            return {"status": "down", "checks": checks}, 503
        status = "ok" if all(value == "ok" for value in checks.values()) else "degraded"
        return {"status": status, "checks": checks}, 200
