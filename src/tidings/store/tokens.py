"""API tokens: rows hold a hash and scopes; the plaintext never reaches the database."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, insert, select
from sqlalchemy.engine import Connection

from tidings.store.clock import TxClock
from tidings.store.schema import api_tokens


@dataclass(frozen=True, slots=True)
class TokenInfo:
    id: int
    name: str
    scopes: tuple[str, ...]
    created_at: datetime


def create(
    conn: Connection, clock: TxClock, name: str, scopes: Sequence[str], token_hash: str
) -> TokenInfo:
    row = (
        conn.execute(
            insert(api_tokens)
            .values(name=name, scopes=list(scopes), token_hash=token_hash, created_at=clock.at())
            .returning(*api_tokens.c)
        )
        .mappings()
        .one()
    )
    return TokenInfo(row["id"], row["name"], tuple(row["scopes"]), row["created_at"])


def find(conn: Connection, token_hash: str) -> TokenInfo | None:
    row = (
        conn.execute(
            select(api_tokens).where(
                api_tokens.c.token_hash == token_hash, api_tokens.c.revoked_at.is_(None)
            )
        )
        .mappings()
        .first()
    )
    if row is None:
        return None
    return TokenInfo(row["id"], row["name"], tuple(row["scopes"]), row["created_at"])


def count(conn: Connection) -> int:
    return int(conn.scalar(select(func.count()).select_from(api_tokens)) or 0)
