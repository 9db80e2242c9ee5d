"""The tokens page (S5): list tokens with their scopes, state, last use and expiry; create one
(its value is shown on the answer page once, never stored or listed); revoke one, which also
ends the admin sessions opened with it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from tidings import views
from tidings.core.duration import parse_duration
from tidings.core.errors import ValidationError
from tidings.web.forms import Form
from tidings.web.history import MAX_ID
from tidings.web.pages import PREFIX, redirect, render
from tidings.web.session import Admin, ServiceDep

router = APIRouter()
SCOPES = ("publish", "read", "admin", "worker")


@router.get("/tokens", response_class=HTMLResponse)
async def token_list(request: Request, admin: Admin, service: ServiceDep) -> Response:
    notice = ""
    revoked = request.query_params.get("revoked", "")
    tokens = [views.token(t) for t in await service.access.tokens()]
    names = {str(t["id"]): t["name"] for t in tokens}
    if revoked in names:
        notice = f"Token {names[revoked]!r} revoked; its sessions ended."
    return _page(request, admin, service, tokens, notice=notice)


@router.post("/tokens", response_class=HTMLResponse)
async def token_create(request: Request, admin: Admin, service: ServiceDep) -> Response:
    form = await Form.read(request)
    scopes = [s for s in SCOPES if form.has(f"scope_{s}")]
    try:
        token, info = await service.access.create_token(
            form.get("name"),
            scopes,
            expires_in_s=_expiry(form.get("expires_in")),
            kinds=_names(form.get("kinds")) if "worker" in scopes else None,
            tenants=_names(form.get("tenants")) if "worker" in scopes else None,
        )
    except ValidationError as error:
        tokens = [views.token(t) for t in await service.access.tokens()]
        return _page(request, admin, service, tokens, 422, error=error.message, form=form)
    tokens = [views.token(t) for t in await service.access.tokens()]
    response = _page(request, admin, service, tokens, 201, created=(views.token(info), token))
    response.headers["Cache-Control"] = "no-store"  # the one page that shows a token
    return response


@router.post("/tokens/{token_id:int}/revoke")
async def token_revoke(token_id: int, admin: Admin, service: ServiceDep) -> Response:
    if not 1 <= token_id <= MAX_ID:
        return redirect(f"{PREFIX}/tokens")
    await service.access.revoke_token(token_id)
    return redirect(f"{PREFIX}/tokens?revoked={token_id}")


def _page(
    request: Request,
    admin: Admin,
    service: ServiceDep,
    tokens: list[dict[str, Any]],
    code: int = 200,
    **context: Any,
) -> Response:
    context.setdefault("form", Form([]))
    context.setdefault("created", None)
    context.setdefault("error", None)
    context.setdefault("notice", "")
    return render(
        request,
        "tokens.html",
        code,
        admin=admin,
        section="tokens",
        tokens=tokens,
        scopes=SCOPES,
        kinds=service.kinds(),
        **context,
    )


def _expiry(text: str) -> float | None:
    if not text:
        return None
    try:
        return parse_duration(text)
    except ValueError as error:
        raise ValidationError("expires_in", str(error)) from None


def _names(text: str) -> list[str] | None:
    names = [part.strip() for part in text.split(",") if part.strip()]
    return names or None
