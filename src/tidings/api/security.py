"""Bearer-token auth: every route but /healthz and /readyz names the scope it needs. A token's
use is recorded after the answer is sent (at most once a minute per token, S5)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import BackgroundTasks, Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from tidings.auth import Scope, allows
from tidings.service import Service, TokenInfo

bearer = HTTPBearer(auto_error=False, description="An API token: `tidings token create`")
_CHALLENGE = {"WWW-Authenticate": "Bearer"}


async def service_of(request: Request) -> Service:
    """The service, as a dependency. Async on purpose: FastAPI runs a plain `def` dependency
    on a worker thread, a thread hop on every request."""
    return _service(request)


def _service(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


def require(scope: Scope) -> Callable[..., Awaitable[TokenInfo]]:
    async def check(
        request: Request,
        background: BackgroundTasks,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> TokenInfo:
        token = await _token(request, credentials)
        access = _service(request).access
        if not allows(token.scopes, scope):
            raise HTTPException(403, f"this token lacks the {scope.value!r} scope")
        if access.use_due(token):
            background.add_task(access.record_use, token.id)
        return token

    return check


async def _token(request: Request, credentials: HTTPAuthorizationCredentials | None) -> TokenInfo:
    if credentials is None or not credentials.credentials:
        raise HTTPException(401, "a bearer token is required", headers=_CHALLENGE)
    token = await _service(request).access.authenticate(credentials.credentials)
    if token is None:
        raise HTTPException(401, "unknown, revoked or expired token", headers=_CHALLENGE)
    return token


async def authenticate(request: Request) -> None:
    """Raise the 401 a route's scope check would, for a request refused before that check
    ran: FastAPI decodes a JSON body before it resolves a route's dependencies, so a body
    that is not JSON would otherwise be answered to anyone. Every route with a body needs
    a token; which scope, the route says once the body is readable."""
    await _token(request, await bearer(request))
