"""The ``console`` blueprint under /console, on the page kit (``webhooks.pages``): its site
(branding, no framing), templates, static files and the console's own template helpers."""

from __future__ import annotations

from typing import Any

from webhooks import pages
from webhooks.console import formatting

#: The console's branding: its name and the kit's default accent; no logo.
BRANDING = pages.Branding(product_name="Webhooks support")

#: The console as the kit serves it: nobody may frame it (``frame-ancestors 'none'``).
SITE = pages.Site(name="console", branding=BRANDING, home="console.overview", layout="console/base.html")

bp = pages.site_blueprint("console", __name__)


@bp.context_processor
def helpers() -> dict[str, Any]:
    return {"cause": formatting.cause_label, "cause_detail": formatting.cause_detail, "actor_label": formatting.actor_label}
