"""API tokens: generation and hashing. The plaintext is shown once and never stored."""

from __future__ import annotations

import hashlib
import secrets
from enum import StrEnum

TOKEN_PREFIX = "tdg_"


class Scope(StrEnum):
    PUBLISH = "publish"
    READ = "read"
    ADMIN = "admin"


#: What each scope may do: admin may do everything, read only reads, publish only publishes.
GRANTS: dict[Scope, frozenset[Scope]] = {
    Scope.ADMIN: frozenset(Scope),
    Scope.READ: frozenset({Scope.READ}),
    Scope.PUBLISH: frozenset({Scope.PUBLISH}),
}


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


_KNOWN = {scope.value for scope in Scope}


def allows(scopes: tuple[str, ...], needed: Scope) -> bool:
    return any(needed in GRANTS[Scope(s)] for s in scopes if s in _KNOWN)
