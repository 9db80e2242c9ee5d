"""Request bodies over the limit are refused with 413 before auth and routing, on every route
and method (S6): from their Content-Length when they declare one, without reading a byte of
them; else while they stream, never holding more than the limit. Only `POST /v1/events/batch`
(exactly that route) gets the batch limit.
"""

from __future__ import annotations

import json

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tidings.core.text import ascii_digits

#: An event body over this is refused with 413, and so is any other request's body.
MAX_BODY_BYTES = 256 * 1024
#: A batch may carry up to 1,000 events.
MAX_BATCH_BYTES = 32 * 1024 * 1024
LIMITS = {("POST", "/v1/events/batch"): MAX_BATCH_BYTES}


def limit_for(method: str, path: str) -> int:
    return LIMITS.get((method, path), MAX_BODY_BYTES)


class BodyLimit:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = limit_for(scope["method"], scope["path"])
        declared = Headers(scope=scope).get("content-length")
        if declared is not None:
            # The server holds a body to its declared length, so a declared length is enough.
            if not ascii_digits(declared) or int(declared) > limit:
                await _too_large(send, limit)
                return
            await self.app(scope, receive, send)
            return
        await self._streamed(scope, receive, send, limit)

    async def _streamed(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        """No declared length (chunked): read up to the limit, then hand the body on."""
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay(message, receive), send)
                return
            body.extend(message.get("body", b""))
            more = bool(message.get("more_body", False))
            if len(body) > limit:
                await _too_large(send, limit)
                return
        whole = {"type": "http.request", "body": bytes(body)}
        await self.app(scope, _replay(whole, receive), send)


def _replay(first: Message, receive: Receive) -> Receive:
    """`first`, then what the server says next (a disconnect, when it comes: responses that
    stream listen for it, so it must not be made up)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return first
        return await receive()

    return replay


async def _too_large(send: Send, limit: int) -> None:
    message = f"request body over {limit // 1024} KiB"
    payload = json.dumps({"error": {"code": "too_large", "message": message}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                (b"connection", b"close"),  # the rest of the body is not read
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})
