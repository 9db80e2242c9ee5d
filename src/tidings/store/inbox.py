"""Inbox messages: written by the `inbox` channel, read by the admin UI and tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from tidings.store.clock import TxClock
from tidings.store.schema import inbox_messages


@dataclass(frozen=True, slots=True)
class InboxMessage:
    id: int
    channel_id: int
    message_id: str
    batch_id: int | None
    delivery_ids: list[int]
    title: str
    body: str
    created_at: datetime


def put(
    conn: Connection,
    clock: TxClock,
    channel_id: int,
    message_id: str,
    batch_id: int | None,
    delivery_ids: Sequence[int],
    title: str,
    body: str,
) -> None:
    conn.execute(
        insert(inbox_messages).values(
            channel_id=channel_id,
            message_id=message_id,
            batch_id=batch_id,
            delivery_ids=list(delivery_ids),
            title=title,
            body=body,
            created_at=clock.at(),
        )
    )


def recent(conn: Connection, channel_id: int | None, limit: int) -> list[InboxMessage]:
    stmt = select(inbox_messages).order_by(inbox_messages.c.id.desc()).limit(limit)
    if channel_id is not None:
        stmt = stmt.where(inbox_messages.c.channel_id == channel_id)
    return [
        InboxMessage(
            id=r["id"],
            channel_id=r["channel_id"],
            message_id=r["message_id"],
            batch_id=r["batch_id"],
            delivery_ids=list(r["delivery_ids"]),
            title=r["title"],
            body=r["body"],
            created_at=r["created_at"],
        )
        for r in conn.execute(stmt).mappings()
    ]
