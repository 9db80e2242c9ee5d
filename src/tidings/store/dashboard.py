"""Aggregates the admin UI shows: channel health, deliveries by state, attempts per hour over a
day, and the failed rows a history filter matches (bulk resend).

Portable SQLAlchemy Core only: hour buckets are computed in Python and counted with
`CASE` sums, so SQLite and PostgreSQL run the same statements.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, and_, case, func, select, type_coerce
from sqlalchemy.engine import Connection

from tidings.core.model import DeliveryQuery
from tidings.core.states import AttemptStatus, State
from tidings.store.clock import TxClock

# The history list's own filter, so a bulk resend preview counts exactly what the list shows.
from tidings.store.history import _JOINED as HISTORY_ROWS
from tidings.store.history import _conditions as history_conditions
from tidings.store.schema import UTCDateTime, attempts, channels, deliveries

d = deliveries
a = attempts

#: Attempt statuses that count as a failure on the dashboard and in channel health.
FAILED_ATTEMPTS = (
    AttemptStatus.RETRYABLE.value,
    AttemptStatus.PERMANENT.value,
    AttemptStatus.RATE_LIMITED.value,
    AttemptStatus.PARTIAL.value,
    AttemptStatus.EXPIRED.value,
)
#: Not yet final: waiting to be sent, or in flight.
OPEN_STATES = (State.PENDING.value, State.SENDING.value)


@dataclass(frozen=True, slots=True)
class ChannelHealth:
    channel_id: int
    last_success_at: datetime | None
    failures_last_hour: int
    pending: int
    oldest_pending_at: datetime | None


@dataclass(frozen=True, slots=True)
class HourBucket:
    start: datetime
    sent: int
    failed: int


def channel_health(conn: Connection, clock: TxClock) -> dict[int, ChannelHealth]:
    """Per channel: last delivered, failed attempts in the last hour, open rows, oldest open."""
    hour_ago = clock.now() - timedelta(hours=1)
    rows = conn.execute(
        select(
            d.c.channel_id,
            func.max(d.c.sent_at),
            func.sum(case((d.c.state.in_(OPEN_STATES), 1), else_=0)),
            type_coerce(
                func.min(case((d.c.state.in_(OPEN_STATES), d.c.created_at), else_=None)),
                UTCDateTime,
            ),
        ).group_by(d.c.channel_id)
    ).all()
    failures: dict[int, int] = dict(
        conn.execute(
            select(d.c.channel_id, func.count())
            .select_from(a.join(d, d.c.id == a.c.delivery_id))
            .where(a.c.status.in_(FAILED_ATTEMPTS), a.c.finished_at >= hour_ago)
            .group_by(d.c.channel_id)
        ).all()
    )
    found: dict[int, ChannelHealth] = {}
    for channel_id, last_sent, pending, oldest in rows:
        found[int(channel_id)] = ChannelHealth(
            channel_id=int(channel_id),
            last_success_at=last_sent,
            failures_last_hour=int(failures.get(channel_id, 0)),
            pending=int(pending or 0),
            oldest_pending_at=oldest,
        )
    for channel_id in conn.scalars(select(channels.c.id)):
        found.setdefault(
            int(channel_id),
            ChannelHealth(int(channel_id), None, int(failures.get(channel_id, 0)), 0, None),
        )
    return found


def state_counts(conn: Connection) -> dict[str, int]:
    """Every state with its number of deliveries (zero included)."""
    counts = {state.value: 0 for state in State}
    for state, n in conn.execute(select(d.c.state, func.count()).group_by(d.c.state)):
        counts[str(state)] = int(n)
    return counts


def hourly_attempts(conn: Connection, clock: TxClock, hours: int) -> list[HourBucket]:
    """Delivered and failed attempts per hour, oldest hour first, the last one ending now."""
    now = clock.now()
    end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    starts = [end - timedelta(hours=hours - i) for i in range(hours)]
    columns: list[ColumnElement[int]] = []
    for start in starts:
        within = and_(a.c.finished_at >= start, a.c.finished_at < start + timedelta(hours=1))
        delivered = and_(within, a.c.status == AttemptStatus.DELIVERED.value)
        failed = and_(within, a.c.status.in_(FAILED_ATTEMPTS))
        columns.append(func.sum(case((delivered, 1), else_=0)))
        columns.append(func.sum(case((failed, 1), else_=0)))
    row = conn.execute(select(*columns).where(a.c.finished_at >= starts[0])).one()
    return [
        HourBucket(start, int(row[2 * i] or 0), int(row[2 * i + 1] or 0))
        for i, start in enumerate(starts)
    ]


def failed_ids(conn: Connection, query: DeliveryQuery, limit: int) -> tuple[list[int], int]:
    """The failed rows the history filter matches, oldest first (at most `limit`), and how many
    there are in all."""
    conditions = [*history_conditions(query), d.c.state == State.FAILED.value]
    total = conn.scalar(select(func.count()).select_from(HISTORY_ROWS).where(*conditions)) or 0
    ids = conn.scalars(
        select(d.c.id).select_from(HISTORY_ROWS).where(*conditions).order_by(d.c.id).limit(limit)
    )
    return [int(i) for i in ids], int(total)
