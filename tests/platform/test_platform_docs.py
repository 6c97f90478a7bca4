"""docs/platforms.md's first customer in three calls: the Python the page shows, run as shown
against the service, creates the tenant, sends its event and opens its portal."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Callable

from flask.testing import FlaskClient

from tests.live_api import LiveApi

PLATFORMS = Path(__file__).resolve().parents[2] / "docs" / "platforms.md"


def three_calls() -> str:
    """The page's one Python block that asks for portal access."""
    blocks = [block for block in re.findall(r"```python\n(.*?)```", PLATFORMS.read_text(), re.DOTALL)
              if "portal-access" in block]
    assert len(blocks) == 1
    return blocks[0]


def test_the_three_calls_the_platform_page_shows_bring_a_new_customer_into_its_portal(
    serve_api: Callable[..., LiveApi], client: FlaskClient, platform: dict[str, str], tmp_path: Path
) -> None:
    live = serve_api()
    script = tmp_path / "three_calls.py"
    script.write_text(three_calls().replace("http://127.0.0.1:8000", live.url))
    key = platform["Authorization"].removeprefix("Bearer ")

    run = subprocess.run([sys.executable, str(script)], env={"PLATFORM_KEY": key}, capture_output=True,
                         text=True, timeout=60)

    assert run.returncode == 0, run.stderr
    tenant = client.get("/v1/tenants/cus_42", headers=platform).json
    assert tenant["name"] == "Acme Corp"
    events = client.get("/v1/tenants/cus_42/events?after=0", headers=platform).json["data"]
    assert [(event["event_type"], event["payload"]) for event in events] == [("order.created", {"order_id": 42})]
    path = run.stdout.strip().split("://", 1)[1].partition("/")[2]
    opened = client.get("/" + path)
    assert opened.status_code in (302, 303) and opened.headers["Location"].endswith("/portal/")
    portal = client.get("/portal/")
    assert portal.status_code == 200 and "Acme Corp" in portal.text
