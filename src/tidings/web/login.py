"""Logging in with an admin token (a session cookie, never the token itself) and out."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from tidings.auth import Scope, allows, token_hash
from tidings.web.forms import Form
from tidings.web.pages import PREFIX, local_path, redirect, render
from tidings.web.session import COOKIE, COOKIE_PATH, service_of, sessions_of

router = APIRouter()


@router.get("/login", response_class=HTMLResponse)
async def login_form(request: Request, next: str = "") -> Response:
    return render(request, "login.html", next=local_path(next, ""), error=None)


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    form = await Form.read(request)
    token = form.get("token")
    target = local_path(form.get("next"), f"{PREFIX}/")
    info = await service_of(request).authenticate(token) if token else None
    if info is None or not allows(info.scopes, Scope.ADMIN):
        error = (
            "Unknown or revoked token."
            if info is None
            else "This token lacks the admin scope; the admin UI needs an admin token."
        )
        status = 401 if info is None else 403
        return render(request, "login.html", status, next=target, error=error)
    sessions = sessions_of(request)
    response: RedirectResponse = redirect(target)
    response.set_cookie(
        COOKIE,
        sessions.issue(token_hash(token)),
        max_age=sessions.lifetime_s,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@router.post("/logout")
async def logout() -> Response:
    response = redirect(f"{PREFIX}/login")
    response.delete_cookie(COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict")
    return response
