"""What a dispatcher asks between claims: which channels have due work, and when more is due."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import CTE, ColumnElement, ScalarSelect, Select, func, select
from sqlalchemy.engine import Connection

from tidings.core.model import Channel
from tidings.store import sealing
from tidings.store.clock import TxClock, prepared_now
from tidings.store.dialect import Dialect
from tidings.store.dialects import dialect_for
from tidings.store.schema import channels, deliveries, is_live

d = deliveries
#: Channels one statement reads at most: a first look reads every due channel, and SQLite
#: takes as few as 32,766 parameters a statement in some builds (PostgreSQL's read binds
#: one array).
CHANNELS_PER_READ = 10_000


def due_channels(
    conn: Connection, clock: TxClock, known: Mapping[int, Channel] | None = None
) -> list[Channel]:
    """Enabled channels with at least one claimable row due now.

    Only channels with live rows are looked at (`_live_channels`), each by the first entry
    of its claim index: a look costs a few index reads per channel with work, whether the
    database holds a hundred channels or ten thousand idle ones.

    `known` are channels from an earlier answer: one unchanged since (same `updated_at`) is
    answered as it was rather than read and decoded again — a dispatcher asks each time a
    job ends, and decoding every channel each time is a cost that grows with the channels.
    """
    known = known or {}
    due = conn.execute(_due_statement(clock.unread), clock.now_param()).all()
    stale = [i for i, updated_at in due if i not in known or known[i].updated_at != updated_at]
    loaded: dict[int, Channel] = {}
    statement = _channels_statement(dialect_for(conn))
    for start in range(0, len(stale), CHANNELS_PER_READ):
        ids = stale[start : start + CHANNELS_PER_READ]
        found = conn.execute(statement, {"ids": ids}).mappings()
        loaded.update((c.id, c) for c in (sealing.channel(conn, r) for r in found))
    # A channel deleted between the two reads is left out.
    return [c for i, _ in due if (c := loaded.get(i) or known.get(i)) is not None]


def warm(conn: Connection, _clock: TxClock) -> None:
    """Read channels as `due_channels` does, for none: the statement a dispatcher's first
    due channel takes, sent once before it is on an event's path."""
    conn.execute(_channels_statement(dialect_for(conn)), {"ids": []}).all()


# The statements a dispatcher asks between claims are built once: building one (and its
# cache key) took more of an idle dispatcher's CPU than its claims did (measured).


@functools.cache
def _due_statement(database_clock: bool) -> Select[Any]:
    live = _live_channels()
    return (
        select(live.c.channel_id, live.c.updated_at)
        .where(
            live.c.updated_at.is_not(None),
            _first_live_at(live.c.channel_id) <= prepared_now(database_clock),
        )
        .order_by(live.c.channel_id)
    )


@functools.cache
def _channels_statement(dialect: Dialect) -> Select[Any]:
    # One array parameter on PostgreSQL: an expanding IN of a first look's ten thousand
    # channels took SQLAlchemy ~0.2 s to render.
    return select(channels).where(dialect.ids_param(channels.c.id, "ids"))


def next_due_at(conn: Connection) -> datetime | None:
    """When the earliest live row of an enabled channel becomes claimable.

    Asked per channel with live rows (the first entry of its claim index), so it costs a
    few index reads per such channel rather than a pass over every live row of a backlog,
    or a look at every channel.
    """
    value: datetime | None = conn.scalar(_next_due_statement())
    return value


@functools.cache
def _next_due_statement() -> Select[Any]:
    live = _live_channels()
    return select(func.min(_first_live_at(live.c.channel_id))).where(live.c.updated_at.is_not(None))


def _live_channels() -> CTE:
    """The channels with live rows (`channel_id`), with the `updated_at` of those enabled
    (None: disabled), found by skipping through the claim index from one channel to the
    next (a recursive query: neither database skips on its own), so channels without live
    rows cost nothing, however many there are. The channel is read by a subquery per live
    channel, not a join: a join may be planned as a scan of every channel."""
    first = select(_live_after(None).label("channel_id")).cte("live", recursive=True)
    step = select(_live_after(first.c.channel_id)).where(first.c.channel_id.is_not(None))
    live = first.union_all(step)
    enabled_at = (
        select(channels.c.updated_at)
        .where(channels.c.id == live.c.channel_id, channels.c.enabled)
        .scalar_subquery()
    )
    return (
        select(live.c.channel_id, enabled_at.label("updated_at"))
        .where(live.c.channel_id.is_not(None))
        .cte("live_ids")
    )


def _live_after(after: ColumnElement[int] | None) -> ScalarSelect[int]:
    """The smallest channel id with a live row (above `after`): one entry of the claim index."""
    stmt = select(d.c.channel_id).where(is_live())
    if after is not None:
        stmt = stmt.where(d.c.channel_id > after)
    return stmt.order_by(d.c.channel_id).limit(1).scalar_subquery()


def _first_live_at(channel_id: ColumnElement[int]) -> ScalarSelect[datetime]:
    """The channel's earliest `next_attempt_at` among its live rows: the first entry of its
    claim index, which gives that order for free (any other plan must sort)."""
    return (
        select(d.c.next_attempt_at)
        .where(d.c.channel_id == channel_id, is_live())
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
