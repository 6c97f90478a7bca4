"""Files the service serves itself outside the API and the console: ``/favicon.ico`` and the
API documentation page ``/docs`` with its assets, so no page needs the internet.

``/docs`` is Swagger UI: its scripts and stylesheet are the Swagger UI distribution shipped by the
pinned ``flask-swagger-ui`` package (Apache-2.0; its ``LICENSE`` and ``VERSION`` are served beside
them under ``/docs/assets/``). The page is ours rather than flask-smorest's, whose page starts
Swagger UI with an inline script: ours loads ``/docs/init.js``, so its Content-Security-Policy
(``webhooks.pages.headers.DOCS_POLICY``) allows no inline script or style.
"""

from __future__ import annotations

from pathlib import Path

import json

import flask_swagger_ui
from flask import Blueprint, Flask, Response, current_app, send_from_directory, url_for
from markupsafe import Markup

from webhooks.pages.headers import docs_headers

#: Where the favicon and the docs page's start-up script live.
STATIC_DIR = Path(__file__).resolve().parent / "static"

#: The Swagger UI distribution (``swagger-ui-bundle.js``, ``swagger-ui.css``, …) of the pinned package.
SWAGGER_UI_DIR = Path(flask_swagger_ui.__file__).resolve().parent / "dist"

#: URL prefix of the Swagger UI assets; flask-smorest's page loads ``<prefix>swagger-ui-bundle.js``.
DOCS_ASSETS_URL = "/docs/assets/"

#: Seconds browsers may keep these files: they change only with a release.
MAX_AGE = 24 * 3600

#: Swagger UI's settings: no badge from the online validator (an image from another host).
SWAGGER_UI_CONFIG = {"validatorUrl": None, "deepLinking": True}

DOCS_PAGE = Markup("""<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>{title}</title>
  <link href="{assets}swagger-ui.css" rel="stylesheet">
</head>
<body>
  <div id="swagger-ui-container" data-config="{config}"></div>
  <script src="{assets}swagger-ui-standalone-preset.js"></script>
  <script src="{assets}swagger-ui-bundle.js"></script>
  <script src="/docs/init.js"></script>
</body>
</html>
""")

blueprint = Blueprint("site_files", __name__)


@blueprint.get("/docs")
def docs() -> Response:
    """Swagger UI on the OpenAPI document, everything loaded from the service."""
    config = {**SWAGGER_UI_CONFIG, "url": url_for("api-docs.openapi_json")}
    page = DOCS_PAGE.format(title=current_app.config["API_TITLE"], assets=DOCS_ASSETS_URL, config=json.dumps(config))
    return Response(page, mimetype="text/html", headers=docs_headers())


@blueprint.get("/docs/init.js")
def docs_script() -> Response:
    return send_from_directory(STATIC_DIR, "docs-init.js", mimetype="text/javascript", max_age=MAX_AGE)


@blueprint.get("/favicon.ico")
def favicon() -> Response:
    return send_from_directory(STATIC_DIR, "favicon.ico", mimetype="image/x-icon", max_age=MAX_AGE)


@blueprint.get(DOCS_ASSETS_URL + "<path:filename>")
def docs_asset(filename: str) -> Response:
    plain_text = "." not in filename  # LICENSE, VERSION
    return send_from_directory(SWAGGER_UI_DIR, filename, mimetype="text/plain" if plain_text else None, max_age=MAX_AGE)


def init_app(app: Flask) -> None:
    app.register_blueprint(blueprint)
