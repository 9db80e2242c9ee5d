"""Redirects stay on the host the client asked, whatever its Host header says: every
`Location` tidings sends is made relative (path and query). Starlette builds its slash
redirects (`/ui` → `/ui/`, `/v1/channels/` → `/v1/channels`) from the Host header, which a
client or a poisoned cache in between controls."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send


def relative(location: str) -> str:
    """`location` without scheme and host; never `//…`, which a browser reads as a host."""
    parts = urlsplit(location)
    path = "/" + parts.path.lstrip("/\\")
    return urlunsplit(("", "", path, parts.query, parts.fragment))


class RelativeRedirects:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_relative(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    (name, relative(value.decode("latin-1")).encode("latin-1"))
                    if name.lower() == b"location"
                    else (name, value)
                    for name, value in message.get("headers", [])
                ]
            await send(message)

        await self.app(scope, receive, send_relative)
