"""The HTTP API application: routers, the error handler, and the request body limit (which
wraps the admin UI mounted beside it too).

Calls tidings.service only; `tidings.server` mounts the admin UI beside it.
"""

from __future__ import annotations

from fastapi import FastAPI

from tidings import __version__
from tidings.api import (
    channels,
    deliveries,
    docs,
    errors,
    events,
    kinds,
    system,
    tokens,
    worker,
)
from tidings.api.bodylimit import BodyLimit
from tidings.api.fast_publish import FastPublish
from tidings.api.redirects import RelativeRedirects
from tidings.api.schemas import ErrorOut
from tidings.service import Service


def create_app(service: Service) -> FastAPI:
    app = FastAPI(
        title="tidings",
        version=__version__,
        docs_url=None,  # served by tidings.api.docs, without a CDN
        redoc_url=None,
        description="Durable notification delivery. Errors are "
        '`{"error": {"code": "...", "message": "..."}}`.',
        responses={
            401: {"model": ErrorOut},
            403: {"model": ErrorOut},
            404: {"model": ErrorOut},
            409: {"model": ErrorOut},
            413: {"model": ErrorOut},
            422: {"model": ErrorOut},
            503: {"model": ErrorOut},
        },
    )
    app.state.service = service
    errors.install(app)
    for router in (
        events.router,
        channels.router,
        kinds.router,
        deliveries.router,
        worker.router,
        tokens.router,
        system.router,
    ):
        app.include_router(router)
    docs.install(app)
    app.add_middleware(FastPublish, service=service)
    app.add_middleware(RelativeRedirects)
    app.add_middleware(BodyLimit)
    return app
