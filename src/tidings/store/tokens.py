"""API tokens (S5): rows hold a hash, scopes, expiry, last use and a worker token's ceiling;
the plaintext never reaches the database. Revoking a token also ends its UI sessions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, or_, select, update
from sqlalchemy.engine import Connection, RowMapping
from sqlalchemy.sql.elements import ColumnElement

from tidings.core.errors import NotFound
from tidings.store.clock import TxClock
from tidings.store.schema import api_tokens, ui_sessions


@dataclass(frozen=True, slots=True)
class TokenInfo:
    id: int
    name: str
    scopes: tuple[str, ...]
    created_at: datetime
    last_used_at: datetime | None = None
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    #: A worker token's ceiling, fixed at creation: the kinds and the tenants it may ever
    #: lease (None: any).
    kinds: tuple[str, ...] | None = None
    tenants: tuple[str, ...] | None = None


def info(row: RowMapping) -> TokenInfo:
    ceiling = row["ceiling"] or {}
    kinds, tenants = ceiling.get("kinds"), ceiling.get("tenants")
    return TokenInfo(
        id=row["id"],
        name=row["name"],
        scopes=tuple(row["scopes"]),
        created_at=row["created_at"],
        last_used_at=row["last_used_at"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
        kinds=tuple(kinds) if kinds is not None else None,
        tenants=tuple(tenants) if tenants is not None else None,
    )


def live(clock: TxClock) -> ColumnElement[bool]:
    """The token is neither revoked nor past its expiry (by the transaction's clock, C4)."""
    t = api_tokens.c
    return t.revoked_at.is_(None) & or_(t.expires_at.is_(None), t.expires_at > clock.at())


def create(
    conn: Connection,
    clock: TxClock,
    name: str,
    scopes: Sequence[str],
    token_hash: str,
    expires_in_s: float | None = None,
    ceiling: Mapping[str, Sequence[str] | None] | None = None,
) -> TokenInfo:
    values: dict[str, Any] = {
        "name": name,
        "scopes": list(scopes),
        "token_hash": token_hash,
        "created_at": clock.at(),
        "expires_at": clock.at(expires_in_s) if expires_in_s is not None else None,
        "ceiling": dict(ceiling) if ceiling is not None else None,
    }
    row = conn.execute(insert(api_tokens).values(values).returning(*api_tokens.c)).mappings()
    return info(row.one())


def find(conn: Connection, clock: TxClock, token_hash: str) -> TokenInfo | None:
    row = (
        conn.execute(select(api_tokens).where(api_tokens.c.token_hash == token_hash, live(clock)))
        .mappings()
        .first()
    )
    return None if row is None else info(row)


def find_many(
    conn: Connection, clock: TxClock, token_hashes: Sequence[str]
) -> dict[str, TokenInfo]:
    """The live tokens among these hashes, by hash (one statement for any number)."""
    t = api_tokens.c
    rows = conn.execute(
        select(api_tokens).where(t.token_hash.in_(set(token_hashes)), live(clock))
    ).mappings()
    return {row["token_hash"]: info(row) for row in rows}


def list_all(conn: Connection) -> list[TokenInfo]:
    rows = conn.execute(select(api_tokens).order_by(api_tokens.c.id)).mappings()
    return [info(row) for row in rows]


def revoke(conn: Connection, clock: TxClock, token_id: int) -> TokenInfo:
    """Revoke (once: a second revocation keeps the first time) and end its sessions."""
    t = api_tokens.c
    conn.execute(
        update(api_tokens)
        .where(t.id == token_id, t.revoked_at.is_(None))
        .values(revoked_at=clock.at())
    )
    conn.execute(delete(ui_sessions).where(ui_sessions.c.token_id == token_id))
    row = conn.execute(select(api_tokens).where(t.id == token_id)).mappings().first()
    if row is None:
        raise NotFound("token", token_id)
    return info(row)


def mark_used(conn: Connection, clock: TxClock, ids: Sequence[int], every_s: float) -> int:
    """Set `last_used_at` to now where it is older than `every_s` (or unset): a token used
    by many processes at once is still written about once per `every_s`."""
    t = api_tokens.c
    stale = or_(t.last_used_at.is_(None), t.last_used_at < clock.at(-every_s))
    result = conn.execute(
        update(api_tokens).where(t.id.in_(list(ids)), stale).values(last_used_at=clock.at())
    )
    return int(result.rowcount or 0)


def count(conn: Connection) -> int:
    return int(conn.scalar(select(func.count()).select_from(api_tokens)) or 0)
