"""The per-channel token bucket held in the database (C6), so it holds across a cluster.

The math is `tidings.core.ratelimit`; this module only loads, locks and saves the row.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from sqlalchemy import Select, bindparam, func, select, update
from sqlalchemy.engine import Connection

from tidings.core import ratelimit
from tidings.core.model import Channel
from tidings.store.clock import TxClock
from tidings.store.dialects import dialect_for
from tidings.store.schema import UTCDateTime, rate_buckets


def create(conn: Connection, channel_id: int, burst: int, now: datetime) -> None:
    full = ratelimit.full(now, burst)
    conn.execute(
        rate_buckets.insert().values(
            channel_id=channel_id, tokens=full.tokens, updated_at=full.updated_at
        )
    )


def lock(conn: Connection, channel: Channel, clock: TxClock) -> ratelimit.Bucket | None:
    """The channel's bucket, locked until commit; None when another claimer holds it.

    On PostgreSQL a concurrent claimer of the same channel skips instead of waiting (W1): the
    one holding the lock is spending this channel's budget right now anyway. An unlimited
    channel has no budget to guard, so its bucket (read only for a provider pause) is not
    locked and its claimers run side by side.
    """
    read_clock = clock.unread
    skip_locked = dialect_for(conn).row_locks and channel.rate_per_min > 0
    stmt = _lock_statement(read_clock, skip_locked)
    row = conn.execute(stmt, {"channel": channel.id}).mappings().first()
    if row is None:
        if skip_locked and _exists(conn, channel.id):
            return None
        create(conn, channel.id, channel.rate_burst, clock.now())
        return ratelimit.full(clock.now(), channel.rate_burst)
    if read_clock:
        clock.adopt(row["clock_now"])
    return ratelimit.Bucket(
        tokens=row["tokens"], updated_at=row["updated_at"], paused_until=row["paused_until"]
    )


@functools.cache
def _lock_statement(read_clock: bool, skip_locked: bool) -> Select[Any]:
    stmt = select(rate_buckets).where(rate_buckets.c.channel_id == bindparam("channel"))
    if read_clock:  # the clock rides along instead of costing its own round trip
        stmt = stmt.add_columns(func.clock_timestamp(type_=UTCDateTime).label("clock_now"))
    if skip_locked:
        stmt = stmt.with_for_update(skip_locked=True)
    return stmt


def save(conn: Connection, channel_id: int, bucket: ratelimit.Bucket) -> None:
    conn.execute(
        update(rate_buckets)
        .where(rate_buckets.c.channel_id == channel_id)
        .values(
            tokens=bucket.tokens,
            updated_at=bucket.updated_at,
            paused_until=bucket.paused_until,
        )
    )


def budget(channel: Channel, bucket: ratelimit.Bucket, now: datetime) -> int:
    return ratelimit.available(bucket, now, channel.rate_per_min, channel.rate_burst)


def spend(
    conn: Connection, channel: Channel, bucket: ratelimit.Bucket, now: datetime, n: int
) -> None:
    if n > 0 and channel.rate_per_min > 0:  # an unlimited bucket has nothing to count
        save(
            conn,
            channel.id,
            ratelimit.take(bucket, now, channel.rate_per_min, channel.rate_burst, n),
        )


def _exists(conn: Connection, channel_id: int) -> bool:
    stmt = select(rate_buckets.c.channel_id).where(rate_buckets.c.channel_id == channel_id)
    return conn.execute(stmt).first() is not None
