"""Aggregates for metrics: live deliveries by channel and state, oldest pending by channel."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, literal_column, select
from sqlalchemy.engine import Connection

from tidings.core.states import State
from tidings.store.schema import channels, deliveries, is_live

d = deliveries


def live_counts_by_channel(conn: Connection) -> dict[tuple[int, str], int]:
    """(channel id, state) -> deliveries pending or sending: read through the index of live
    rows, so its cost is the queue's, not that of every row ever sent."""
    stmt = select(d.c.channel_id, d.c.state, func.count()).where(is_live())
    stmt = stmt.group_by(d.c.channel_id, d.c.state)
    return {(int(channel), str(state)): int(n) for channel, state, n in conn.execute(stmt)}


def oldest_pending_by_channel(conn: Connection) -> list[tuple[str, datetime]]:
    stmt = (
        select(channels.c.name, func.min(d.c.created_at))
        .select_from(d.join(channels, channels.c.id == d.c.channel_id))
        # A literal and the live predicate word for word, so both planners read an index of
        # live rows (partial indexes) rather than every row ever sent.
        .where(d.c.state == literal_column(f"'{State.PENDING.value}'"), is_live())
        .group_by(channels.c.name)
    )
    return [(str(name), oldest) for name, oldest in conn.execute(stmt)]
