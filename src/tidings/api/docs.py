"""`/docs`: Swagger UI over `/openapi.json`, served by tidings itself — assets from the
fastapi-offline package, no CDN, works offline — under a strict Content-Security-Policy (no
inline script: the page starts Swagger UI from a script of its own)."""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter, FastAPI
from fastapi.responses import HTMLResponse, Response
from starlette.staticfiles import StaticFiles

ASSETS = "/docs/assets"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
PAGE = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>tidings API</title>
<link rel="stylesheet" href="{ASSETS}/swagger-ui.css">
<link rel="icon" href="{ASSETS}/favicon.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="{ASSETS}/swagger-ui-bundle.js"></script>
<script src="/docs/start.js"></script>
</body>
</html>
"""
START = """window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
});
"""

router = APIRouter(include_in_schema=False)


@router.get("/docs")
async def docs() -> HTMLResponse:
    return HTMLResponse(PAGE, headers=HEADERS)


@router.get("/docs/start.js")
async def start() -> Response:
    return Response(START, media_type="text/javascript", headers=HEADERS)


def install(app: FastAPI) -> None:
    app.include_router(router)
    app.mount(ASSETS, StaticFiles(directory=str(files("fastapi_offline") / "static")))
