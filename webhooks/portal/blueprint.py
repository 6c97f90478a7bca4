"""The ``portal`` blueprint under /portal, on the page kit (``webhooks.pages``), and its template helpers."""

from __future__ import annotations

from typing import Any

from webhooks import pages
from webhooks.console import formatting

bp = pages.site_blueprint("portal", __name__)


@bp.context_processor
def helpers() -> dict[str, Any]:
    return {"cause": formatting.cause_label}
