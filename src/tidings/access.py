"""Who may do what (S5): API tokens with a lifecycle — names, scopes, optional expiry, last
use, revocation, a worker token's ceiling of kinds and tenants — and the admin UI's
server-side sessions. Entry points reach it as `Service.access`.

Service level: imports the Store, tidings.auth and tidings.core.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from tidings.auth import Scope, new_session_id, new_token, token_hash
from tidings.core.duration import checked_seconds
from tidings.core.errors import StoreError, ValidationError
from tidings.store import Store
from tidings.store.tokens import TokenInfo

log = logging.getLogger("tidings.access")

#: `last_used_at` is written at most this often per token (and never before the answer).
USAGE_EVERY_S = 60.0
#: A session's `last_seen_at` is written at most this often: the idle timeout's resolution.
SESSION_TOUCH_S = 60.0
MAX_CEILING_ITEMS = 1000


@dataclass(frozen=True, slots=True)
class SessionPolicy:
    #: A session unused this long ends.
    idle_s: float = 1800.0
    #: A session ends this long after login, however busy.
    lifetime_s: float = 12 * 3600.0


class Access:
    def __init__(
        self,
        store: Store,
        kinds: Callable[[], Collection[str]],
        policy: SessionPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._kinds = kinds
        self.policy = policy or SessionPolicy()
        self._clock = clock
        #: Token id → when this process last wrote its `last_used_at`.
        self._used: dict[int, float] = {}

    # -- tokens ---------------------------------------------------------------------------

    async def create_token(
        self,
        name: str,
        scopes: Sequence[str],
        *,
        expires_in_s: float | None = None,
        kinds: Sequence[str] | None = None,
        tenants: Sequence[str] | None = None,
    ) -> tuple[str, TokenInfo]:
        """A new token (its plaintext, shown once) and its stored description."""
        checked = _scopes(scopes)
        _name(name)
        ceiling = None
        if Scope.WORKER.value in checked:
            ceiling = {"kinds": self._ceiling_kinds(kinds), "tenants": _tenants(tenants)}
        elif kinds is not None or tenants is not None:
            raise ValidationError("kinds", "a ceiling of kinds and tenants is for worker tokens")
        if expires_in_s is not None:
            try:
                expires_in_s = checked_seconds(expires_in_s)
            except ValueError as error:
                raise ValidationError("expires_in", str(error)) from None
        token = new_token()
        info = await self._store.create_token(
            name, checked, token_hash(token), expires_in_s=expires_in_s, ceiling=ceiling
        )
        return token, info

    async def tokens(self) -> list[TokenInfo]:
        return await self._store.list_tokens()

    async def revoke_token(self, token_id: int) -> TokenInfo:
        """Revoke a token; its UI sessions end with it. NotFound for an unknown id."""
        return await self._store.revoke_token(token_id)

    async def authenticate(self, token: str) -> TokenInfo | None:
        """The live token `token` names (not revoked, not expired), or None."""
        if not token.isascii() or len(token) > 200:
            return None
        return await self._store.find_token(token_hash(token))

    def use_due(self, info: TokenInfo) -> bool:
        """Whether this use should be written (at most once a minute per token); the caller
        writes it with `record_use` after answering, off the request's critical path."""
        now = self._clock()
        if now - self._used.get(info.id, -USAGE_EVERY_S) < USAGE_EVERY_S:
            return False
        self._used[info.id] = now
        return True

    async def record_use(self, token_id: int) -> None:
        try:
            await self._store.mark_tokens_used([token_id], USAGE_EVERY_S)
        except StoreError as error:  # bookkeeping only: the request itself succeeded
            log.warning("could not record a use of token %d: %s", token_id, error)

    # -- admin UI sessions ----------------------------------------------------------------

    async def open_session(self, token: TokenInfo) -> str:
        """A new session for `token`; returns the cookie value (only its hash is stored)."""
        value = new_session_id()
        await self._store.open_session(
            token_hash(value),
            token.id,
            lifetime_s=self.policy.lifetime_s,
            idle_s=self.policy.idle_s,
        )
        return value

    async def session(self, value: str) -> TokenInfo | None:
        """The live token behind a live session cookie, or None; records the visit."""
        if not value.isascii() or len(value) > 200:
            return None
        hashed = token_hash(value)
        found = await self._store.find_session(
            hashed, idle_s=self.policy.idle_s, touch_every_s=SESSION_TOUCH_S
        )
        if found is None:
            return None
        if found.stale:
            await self._store.touch_session(hashed)
        return found.token

    async def end_session(self, value: str) -> None:
        if value.isascii() and len(value) <= 200:
            await self._store.end_session(token_hash(value))

    # -- validation -----------------------------------------------------------------------

    def _ceiling_kinds(self, kinds: Sequence[str] | None) -> list[str] | None:
        if kinds is None:
            return None
        known = self._kinds()
        _list("kinds", kinds)
        unknown = sorted({k for k in kinds if k not in known})
        if unknown:
            raise ValidationError("kinds", f"unknown kind(s): {', '.join(unknown)}")
        return sorted(set(kinds))


def narrowed(declared: Sequence[str] | None, ceiling: Sequence[str] | None) -> list[str] | None:
    """What a worker gets: what it declares, within its token's ceiling (None: no limit)."""
    if ceiling is None:
        return list(declared) if declared is not None else None
    if declared is None:
        return list(ceiling)
    return [item for item in declared if item in ceiling]


def _scopes(scopes: Sequence[str]) -> list[str]:
    known = {scope.value for scope in Scope}
    if not scopes or any(s not in known for s in scopes):
        raise ValidationError("scopes", f"each scope must be one of {', '.join(sorted(known))}")
    unique = sorted(set(scopes))
    if Scope.WORKER.value in unique and len(unique) > 1:
        raise ValidationError("scopes", "a worker token has the worker scope alone")
    return unique


def _name(name: str) -> None:
    if not name or len(name) > 100 or not name.isprintable():
        raise ValidationError("name", "a name of 1 to 100 printable characters is required")


def _tenants(tenants: Sequence[str] | None) -> list[str] | None:
    if tenants is None:
        return None
    _list("tenants", tenants)
    return sorted(set(tenants))


def _list(field: str, items: Sequence[str]) -> None:
    if isinstance(items, str) or not items or len(items) > MAX_CEILING_ITEMS:
        raise ValidationError(field, f"a list of 1 to {MAX_CEILING_ITEMS} names, or none")
    for item in items:
        if not isinstance(item, str) or not item or len(item) > 200 or not item.isprintable():
            raise ValidationError(field, "each entry is 1 to 200 printable characters")
