"""The HTTP API application: routers, the error handler, and the request body limit.

Calls tidings.service only; `tidings.server` mounts the admin UI beside it.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tidings import __version__
from tidings.api import channels, deliveries, errors, events, kinds, system, tokens, worker
from tidings.api.schemas import ErrorOut
from tidings.service import Service

#: An event body over this is refused with 413; a batch may carry up to 1,000 of them.
MAX_EVENT_BYTES = 256 * 1024
MAX_BATCH_BYTES = 32 * 1024 * 1024


def create_app(service: Service) -> FastAPI:
    app = FastAPI(
        title="tidings",
        version=__version__,
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
    app.add_middleware(BodyLimit)
    return app


class BodyLimit:
    """Refuse request bodies over the limit with 413 before anything reads them."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        limit = MAX_BATCH_BYTES if scope["path"].endswith("/batch") else MAX_EVENT_BYTES
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay(message), send)
                return
            body.extend(message.get("body", b""))
            more = bool(message.get("more_body", False))
            if len(body) > limit:
                await _too_large(send, limit)
                return
        await self.app(scope, _replay({"type": "http.request", "body": bytes(body)}), send)


def _replay(first: Message) -> Receive:
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return first
        return {"type": "http.disconnect"}

    return receive


async def _too_large(send: Send, limit: int) -> None:
    body: dict[str, Any] = {
        "error": {"code": "too_large", "message": f"request body over {limit // 1024} KiB"}
    }
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})
