"""Admin sessions (S5): the cookie holds a random session id, never the token; the session is
a row on the server (tidings.access), so logout, revoking its token, the idle timeout and the
absolute lifetime each end it at once. Login attempts are throttled per client address.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from tidings.auth import Scope, allows
from tidings.core.throttle import LoginThrottle
from tidings.service import Service, TokenInfo

COOKIE = "tidings_session"
COOKIE_PATH = "/ui"


class LoginRequired(Exception):
    """No valid admin session: the UI answers with a redirect to the login page."""


def service_of(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


def throttle_of(request: Request) -> LoginThrottle:
    throttle: LoginThrottle = request.app.state.login_throttle
    return throttle


async def current_admin(request: Request) -> TokenInfo:
    """The admin token behind the session cookie, checked afresh against the database."""
    value = request.cookies.get(COOKIE)
    token = await service_of(request).access.session(value) if value else None
    if token is None or not allows(token.scopes, Scope.ADMIN):
        raise LoginRequired
    return token


Admin = Annotated[TokenInfo, Depends(current_admin)]
ServiceDep = Annotated[Service, Depends(service_of)]
