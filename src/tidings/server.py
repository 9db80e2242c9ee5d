"""The one ASGI application `tidings serve` runs: the HTTP API with the admin UI mounted at
/ui, and / leading to the UI.

Sits above tidings.api and tidings.web (which never import each other) and below tidings.cli.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import RedirectResponse

from tidings.api import create_app as create_api
from tidings.service import Service
from tidings.web import create_ui


def create_app(service: Service) -> FastAPI:
    app = create_api(service)
    app.mount("/ui", create_ui(service))  # the admin UI: HTML pages and errors of its own

    @app.get("/", include_in_schema=False)
    async def home() -> RedirectResponse:
        return RedirectResponse("/ui/")

    return app
