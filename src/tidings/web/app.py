"""The admin UI application, mounted at /ui by the API app: its routers, static files, HTML
error pages and login redirects, wrapped in the guard (security headers, cross-site refusal).
"""

from __future__ import annotations

import logging
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from tidings.core.errors import TidingsError
from tidings.core.throttle import LoginThrottle
from tidings.service import Service
from tidings.web import bulk, channels, dashboard, deliveries, events, inbox, login, tokens
from tidings.web.guard import Guard
from tidings.web.pages import PREFIX, STATIC_DIR, redirect, render
from tidings.web.session import LoginRequired

log = logging.getLogger("tidings.web")
TITLES = {403: "Forbidden", 404: "Not found", 405: "Method not allowed", 409: "Conflict"}


def create_ui(service: Service) -> ASGIApp:
    ui = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    ui.state.service = service
    ui.state.login_throttle = LoginThrottle()  # per process, keyed by client address
    for router in (login.router, dashboard.router, bulk.router, deliveries.router):
        ui.include_router(router)
    ui.include_router(channels.router)
    ui.include_router(inbox.router)
    ui.include_router(tokens.router)
    ui.include_router(events.router)
    ui.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    _install_errors(ui)
    return Guard(ui)


def _install_errors(ui: FastAPI) -> None:
    @ui.exception_handler(LoginRequired)
    async def login_required(request: Request, _error: LoginRequired) -> Response:
        here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return redirect(f"{PREFIX}/login?next={quote(here, safe='')}")

    @ui.exception_handler(TidingsError)
    async def domain(request: Request, error: TidingsError) -> Response:
        return _error_page(request, error.status, error.message)

    @ui.exception_handler(HTTPException)
    async def http(request: Request, error: HTTPException) -> Response:
        return _error_page(request, error.status_code, str(error.detail))

    @ui.exception_handler(RequestValidationError)
    async def invalid(request: Request, _error: RequestValidationError) -> Response:
        return _error_page(request, 404, "Not Found")

    @ui.exception_handler(Exception)
    async def unexpected(request: Request, error: Exception) -> Response:
        log.exception("unexpected error in the admin UI", exc_info=error)
        return _error_page(request, 500, "Internal error; see the server log.")


def _error_page(request: Request, status: int, message: str) -> Response:
    title = TITLES.get(status, "Error" if status < 500 else "Server error")
    return render(request, "error.html", status, title=title, message=message, status=status)
