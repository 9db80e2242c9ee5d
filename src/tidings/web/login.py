"""Logging in with an admin token (a server-side session, never the token itself, in the
cookie) and out (the session row is deleted, so the old cookie stops working at once).

Failed logins are throttled per client address (S5): after a few, that address waits a
growing delay (429 with Retry-After) — other addresses, the real admin's, are not slowed.
"""

from __future__ import annotations

import math
import time

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from tidings.auth import Scope, allows
from tidings.core.throttle import client_key
from tidings.web.forms import Form
from tidings.web.pages import PREFIX, local_path, redirect, render
from tidings.web.session import COOKIE, COOKIE_PATH, service_of, throttle_of

router = APIRouter()


@router.get("/login", response_class=HTMLResponse)
async def login_form(request: Request, next: str = "") -> Response:
    return render(request, "login.html", next=local_path(next, ""), error=None)


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    client = client_key(request.client.host if request.client else None)
    throttle = throttle_of(request)
    wait = throttle.retry_after(client, time.monotonic())
    if wait > 0:
        return _throttled(request, wait)
    form = await Form.read(request)
    token = form.get("token")
    target = local_path(form.get("next"), f"{PREFIX}/")
    service = service_of(request)
    info = await service.access.authenticate(token) if token else None
    if info is None:
        throttle.failed(client, time.monotonic())
        error = "Unknown, revoked or expired token."
        return render(request, "login.html", 401, next=target, error=error)
    if not allows(info.scopes, Scope.ADMIN):
        error = "This token lacks the admin scope; the admin UI needs an admin token."
        return render(request, "login.html", 403, next=target, error=error)
    throttle.succeeded(client)
    response: RedirectResponse = redirect(target)
    response.set_cookie(
        COOKIE,
        await service.access.open_session(info),
        max_age=int(service.access.policy.lifetime_s),
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


def _throttled(request: Request, wait_s: float) -> Response:
    seconds = max(1, math.ceil(wait_s))
    error = f"Too many failed logins from your address: try again in {seconds} s."
    response = render(request, "login.html", 429, next="", error=error)
    response.headers["Retry-After"] = str(seconds)
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    value = request.cookies.get(COOKIE)
    if value:
        await service_of(request).access.end_session(value)
    response = redirect(f"{PREFIX}/login")
    response.delete_cookie(COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict")
    return response
