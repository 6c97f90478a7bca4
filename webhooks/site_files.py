"""Files the service serves itself outside the API and the console: ``/favicon.ico`` and the
assets of the API documentation page ``/docs``, so no page needs the internet.

``/docs`` is flask-smorest's Swagger UI page; its scripts and stylesheet are the Swagger UI
distribution shipped by the pinned ``flask-swagger-ui`` package (Apache-2.0; its ``LICENSE`` and
``VERSION`` are served beside them under ``/docs/assets/``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import flask_swagger_ui
from flask import Blueprint, Flask, Response, send_from_directory

#: Where the favicon lives (a 16 and 32 px ICO).
STATIC_DIR = Path(__file__).resolve().parent / "static"

#: The Swagger UI distribution (``swagger-ui-bundle.js``, ``swagger-ui.css``, …) of the pinned package.
SWAGGER_UI_DIR = Path(flask_swagger_ui.__file__).resolve().parent / "dist"

#: URL prefix of the Swagger UI assets; flask-smorest's page loads ``<prefix>swagger-ui-bundle.js``.
DOCS_ASSETS_URL = "/docs/assets/"

#: Seconds browsers may keep these files: they change only with a release.
MAX_AGE = 24 * 3600

blueprint = Blueprint("site_files", __name__)


def docs_config() -> dict[str, Any]:
    """The flask-smorest settings that render ``/docs`` with Swagger UI from ``DOCS_ASSETS_URL``."""
    return {
        "OPENAPI_SWAGGER_UI_PATH": "/docs",
        "OPENAPI_SWAGGER_UI_URL": DOCS_ASSETS_URL,
        # No badge from the online validator: it is an image loaded from another host.
        "OPENAPI_SWAGGER_UI_CONFIG": {"validatorUrl": None, "deepLinking": True},
    }


@blueprint.get("/favicon.ico")
def favicon() -> Response:
    return send_from_directory(STATIC_DIR, "favicon.ico", mimetype="image/x-icon", max_age=MAX_AGE)


@blueprint.get(DOCS_ASSETS_URL + "<path:filename>")
def docs_asset(filename: str) -> Response:
    plain_text = "." not in filename  # LICENSE, VERSION
    return send_from_directory(SWAGGER_UI_DIR, filename, mimetype="text/plain" if plain_text else None, max_age=MAX_AGE)


def init_app(app: Flask) -> None:
    app.register_blueprint(blueprint)
