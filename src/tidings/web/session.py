"""Admin sessions: a signed cookie naming a token's hash and an expiry, never the token.

The signing key is random per process (a restart logs everyone out). Every request looks the
token up again by its hash, so revoking the token ends its sessions at once.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Request

from tidings.auth import Scope, allows
from tidings.service import Service, TokenInfo

COOKIE = "tidings_session"
COOKIE_PATH = "/ui"
LIFETIME_S = 12 * 3600


class LoginRequired(Exception):
    """No valid admin session: the UI answers with a redirect to the login page."""


class Sessions:
    def __init__(
        self,
        key: bytes | None = None,
        lifetime_s: int = LIFETIME_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._key = key or secrets.token_bytes(32)
        self.lifetime_s = lifetime_s
        self._clock = clock

    def issue(self, token_hash: str) -> str:
        payload = f"{token_hash}.{int(self._clock()) + self.lifetime_s}"
        return f"{payload}.{self._sign(payload)}"

    def read(self, value: str) -> str | None:
        """The token hash a cookie names, if its signature holds and it has not expired."""
        token_hash, _, rest = value.partition(".")
        expiry, _, signature = rest.partition(".")
        payload = f"{token_hash}.{expiry}"
        if not signature or not hmac.compare_digest(signature, self._sign(payload)):
            return None
        if not expiry.isdigit() or int(expiry) < self._clock():
            return None
        return token_hash

    def _sign(self, payload: str) -> str:
        return hmac.new(self._key, payload.encode(), hashlib.sha256).hexdigest()


def service_of(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


def sessions_of(request: Request) -> Sessions:
    sessions: Sessions = request.app.state.sessions
    return sessions


async def current_admin(request: Request) -> TokenInfo:
    """The admin token behind the session cookie, checked afresh against the database."""
    value = request.cookies.get(COOKIE)
    token_hash = sessions_of(request).read(value) if value else None
    if token_hash is None:
        raise LoginRequired
    token = await service_of(request).token_by_hash(token_hash)
    if token is None or not allows(token.scopes, Scope.ADMIN):
        raise LoginRequired
    return token


Admin = Annotated[TokenInfo, Depends(current_admin)]
ServiceDep = Annotated[Service, Depends(service_of)]
