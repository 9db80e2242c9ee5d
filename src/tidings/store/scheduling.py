"""What a dispatcher asks between claims: which channels have due work, and when more is due."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from tidings.core.model import Channel
from tidings.store import rows
from tidings.store.clock import TxClock
from tidings.store.schema import channels, deliveries, is_live

d = deliveries


def due_channels(conn: Connection, clock: TxClock) -> list[Channel]:
    """Enabled channels with at least one claimable row due now."""
    due = (
        select(d.c.id)
        .where(d.c.channel_id == channels.c.id, is_live())
        .where(d.c.next_attempt_at <= clock.at())
        .exists()
    )
    stmt = select(channels).where(channels.c.enabled, due).order_by(channels.c.id)
    return [rows.channel(r) for r in conn.execute(stmt).mappings()]


def next_due_at(conn: Connection) -> datetime | None:
    """When the earliest live row of an enabled channel becomes claimable.

    Asked per channel (the first entry of its claim index), so it costs a few index reads
    per channel rather than a pass over every live row of a backlog.
    """
    first = (
        select(d.c.next_attempt_at)
        .where(d.c.channel_id == channels.c.id, is_live())
        .order_by(d.c.next_attempt_at)
        .limit(1)
        .scalar_subquery()
    )
    value: datetime | None = conn.scalar(select(func.min(first)).where(channels.c.enabled))
    return value


def largest_timeout(conn: Connection) -> tuple[float, str] | None:
    """C5: the largest `timeout_s` of any stored channel, with the channel's name."""
    row = conn.execute(
        select(channels.c.timeout_s, channels.c.name).order_by(channels.c.timeout_s.desc()).limit(1)
    ).first()
    return None if row is None else (float(row[0]), str(row[1]))
