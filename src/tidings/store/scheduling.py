"""What a dispatcher asks between claims: which channels have due work, and when more is due."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from sqlalchemy import ScalarSelect, func, select
from sqlalchemy.engine import Connection

from tidings.core.model import Channel
from tidings.store import sealing
from tidings.store.clock import TxClock
from tidings.store.schema import channels, deliveries, is_live

d = deliveries


def due_channels(
    conn: Connection, clock: TxClock, known: Mapping[int, Channel] | None = None
) -> list[Channel]:
    """Enabled channels with at least one claimable row due now.

    Asked as "the channel's earliest live row is due", read per channel from the claim
    index: put as EXISTS, PostgreSQL may scan the table for the first live row, which walks
    past every row already sent, a cost that grows with the table.

    `known` are channels from an earlier answer: one unchanged since (same `updated_at`) is
    answered as it was rather than read and decoded again — a dispatcher asks each time a
    job ends, and decoding every channel each time is a cost that grows with the channels.
    """
    known = known or {}
    due = conn.execute(
        select(channels.c.id, channels.c.updated_at)
        .where(channels.c.enabled, _first_live_at() <= clock.at())
        .order_by(channels.c.id)
    ).all()
    stale = [i for i, updated_at in due if i not in known or known[i].updated_at != updated_at]
    loaded = {}
    if stale:
        found = conn.execute(select(channels).where(channels.c.id.in_(stale))).mappings()
        loaded = {c.id: c for c in (sealing.channel(conn, r) for r in found)}
    # A channel deleted between the two reads is left out.
    return [c for i, _ in due if (c := loaded.get(i) or known.get(i)) is not None]


def next_due_at(conn: Connection) -> datetime | None:
    """When the earliest live row of an enabled channel becomes claimable.

    Asked per channel (the first entry of its claim index), so it costs a few index reads
    per channel rather than a pass over every live row of a backlog.
    """
    stmt = select(func.min(_first_live_at())).where(channels.c.enabled)
    value: datetime | None = conn.scalar(stmt)
    return value


def _first_live_at() -> ScalarSelect[datetime]:
    """The channel's earliest `next_attempt_at` among its live rows: the first entry of its
    claim index, which gives that order for free (any other plan must sort)."""
    return (
        select(d.c.next_attempt_at)
        .where(d.c.channel_id == channels.c.id, is_live())
        .order_by(d.c.next_attempt_at)
        .limit(1)
        .scalar_subquery()
    )


def largest_timeout(conn: Connection) -> tuple[float, str] | None:
    """C5: the largest `timeout_s` of any stored channel, with the channel's name."""
    row = conn.execute(
        select(channels.c.timeout_s, channels.c.name).order_by(channels.c.timeout_s.desc()).limit(1)
    ).first()
    return None if row is None else (float(row[0]), str(row[1]))
