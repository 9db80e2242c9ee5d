"""Admin UI sessions (S5): one row per login, found by the SHA-256 of its cookie value.

A session is valid while its row exists, its token is live, its absolute expiry is ahead and
it was seen within the idle timeout — all judged by the transaction's clock (C4).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, insert, or_, select, update
from sqlalchemy.engine import Connection

from tidings.store import tokens
from tidings.store.clock import TxClock
from tidings.store.schema import api_tokens, ui_sessions


@dataclass(frozen=True, slots=True)
class SessionInfo:
    token: tokens.TokenInfo
    #: Last seen longer ago than the caller's touch interval: time to record this visit.
    stale: bool


def open_session(
    conn: Connection,
    clock: TxClock,
    session_hash: str,
    token_id: int,
    lifetime_s: float,
    idle_s: float,
) -> None:
    """Store a new session; ended ones are swept on the way, so the table stays small."""
    s = ui_sessions.c
    ended = or_(s.expires_at <= clock.at(), s.last_seen_at <= clock.at(-idle_s))
    conn.execute(delete(ui_sessions).where(ended))
    conn.execute(
        insert(ui_sessions).values(
            session_hash=session_hash,
            token_id=token_id,
            created_at=clock.at(),
            last_seen_at=clock.at(),
            expires_at=clock.at(lifetime_s),
        )
    )


def find(
    conn: Connection, clock: TxClock, session_hash: str, idle_s: float, touch_every_s: float
) -> SessionInfo | None:
    s = ui_sessions.c
    stale = (s.last_seen_at < clock.at(-touch_every_s)).label("session_stale")
    row = (
        conn.execute(
            select(api_tokens, stale)
            .join(ui_sessions, s.token_id == api_tokens.c.id)
            .where(
                s.session_hash == session_hash,
                s.expires_at > clock.at(),
                s.last_seen_at > clock.at(-idle_s),
                tokens.live(clock),
            )
        )
        .mappings()
        .first()
    )
    if row is None:
        return None
    return SessionInfo(tokens.info(row), bool(row["session_stale"]))


def touch(conn: Connection, clock: TxClock, session_hash: str) -> None:
    conn.execute(
        update(ui_sessions)
        .where(ui_sessions.c.session_hash == session_hash)
        .values(last_seen_at=clock.at())
    )


def end(conn: Connection, session_hash: str) -> int:
    result = conn.execute(delete(ui_sessions).where(ui_sessions.c.session_hash == session_hash))
    return int(result.rowcount or 0)
