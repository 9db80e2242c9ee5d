"""API tokens: scopes, generation and hashing. The plaintext is shown once and never stored.

Service level: imports only the standard library.
"""

from __future__ import annotations

import hashlib
import secrets
from enum import StrEnum

TOKEN_PREFIX = "tdg_"


class Scope(StrEnum):
    PUBLISH = "publish"
    READ = "read"
    ADMIN = "admin"
    #: Remote workers (W4): lease and report only, within a ceiling of kinds and tenants.
    WORKER = "worker"


#: What each scope may do: admin everything but a worker's lease (which hands out channel
#: secrets), read only reads, publish only publishes, worker only leases and reports.
GRANTS: dict[Scope, frozenset[Scope]] = {
    Scope.ADMIN: frozenset({Scope.ADMIN, Scope.READ, Scope.PUBLISH}),
    Scope.READ: frozenset({Scope.READ}),
    Scope.PUBLISH: frozenset({Scope.PUBLISH}),
    Scope.WORKER: frozenset({Scope.WORKER}),
}


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def new_session_id() -> str:
    return secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


_KNOWN = {scope.value for scope in Scope}


def allows(scopes: tuple[str, ...], needed: Scope) -> bool:
    return any(needed in GRANTS[Scope(s)] for s in scopes if s in _KNOWN)
