"""The UI's outer wrapper: security headers on every response, and cross-site writes refused.

A POST (or any other unsafe method) must come from this origin: `Sec-Fetch-Site` of
`same-origin` or `none` (typed or bookmarked), or, from a client that sends no fetch
metadata, an `Origin` equal to the request's own. Anything else is answered 403 before a
route runs, so nothing changes.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
]
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
SAME_SITE_FETCHES = frozenset({"same-origin", "none"})

REFUSED_PAGE = b"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Refused - tidings</title>
<link rel="stylesheet" href="/ui/static/app.css"></head>
<body><main class="narrow"><h1>Cross-site request refused</h1>
<p>This request did not come from the tidings admin UI itself, so nothing was changed.</p>
<p><a href="/ui/">Back to the dashboard</a></p></main></body></html>
"""


def same_origin(scope: Scope) -> bool:
    headers = Headers(scope=scope)
    fetch_site = headers.get("sec-fetch-site")
    origin = headers.get("origin")
    own = f"{scope.get('scheme', 'http')}://{headers.get('host', '')}"
    if origin is not None and origin != own:
        return False
    if fetch_site is not None:
        return fetch_site in SAME_SITE_FETCHES
    return origin == own


class Guard:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in SECURITY_HEADERS if k not in names]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        if scope["method"] not in SAFE_METHODS and not same_origin(scope):
            await _refuse(with_headers)
            return
        await self.app(scope, receive, with_headers)


async def _refuse(send: Send) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 403,
            "headers": [
                (b"content-type", b"text/html; charset=utf-8"),
                (b"content-length", str(len(REFUSED_PAGE)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": REFUSED_PAGE})
