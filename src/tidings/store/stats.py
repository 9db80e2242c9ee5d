"""Aggregates for metrics and dashboards: deliveries by channel and state, oldest pending."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, literal_column, select
from sqlalchemy.engine import Connection

from tidings.core.states import State
from tidings.store.schema import channels, deliveries, is_live

d = deliveries


def counts_by_channel_state(conn: Connection) -> list[tuple[str, str, int]]:
    stmt = (
        select(channels.c.name, d.c.state, func.count())
        .select_from(d.join(channels, channels.c.id == d.c.channel_id))
        .group_by(channels.c.name, d.c.state)
    )
    return [(str(name), str(state), int(n)) for name, state, n in conn.execute(stmt)]


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
