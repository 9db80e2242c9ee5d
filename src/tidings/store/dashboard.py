"""Aggregates the admin UI shows: channel health, deliveries by state, attempts per hour over a
day, and the failed rows a history filter matches (bulk resend).

Portable SQLAlchemy Core but for the hour of a timestamp, which each backend computes its own
way. Counts that could read every row are bounded (see `history.count_matching`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import BigInteger, ColumnElement, case, cast, func, select, type_coerce
from sqlalchemy.engine import Connection

from tidings.core.model import DeliveryQuery
from tidings.core.states import AttemptStatus, State
from tidings.store.clock import TxClock

# The history list's own filter, so a bulk resend preview counts exactly what the list shows.
from tidings.store.history import _JOINED as HISTORY_ROWS
from tidings.store.history import EXACT_TOTAL_UP_TO, count_matching
from tidings.store.history import _conditions as history_conditions
from tidings.store.schema import UTCDateTime, attempts, channels, deliveries, is_live

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


def state_counts(conn: Connection, exact_up_to: int = EXACT_TOTAL_UP_TO) -> dict[str, int]:
    """Every state with its number of deliveries (zero included): live states counted, the
    others exact up to `exact_up_to` and estimated beyond it, like the history's totals, so
    the dashboard never reads every row ever sent."""
    counts = {state.value: 0 for state in State}
    live = select(d.c.state, func.count()).where(is_live()).group_by(d.c.state)
    for state, n in conn.execute(live):
        counts[str(state)] = int(n)
    for state in (State.FAILED, State.SKIPPED):
        counts[state.value] = count_matching(conn, DeliveryQuery(state=state), exact_up_to)[0]
    everything = count_matching(conn, DeliveryQuery(), exact_up_to)[0]
    counts[State.SENT.value] = max(0, everything - sum(counts.values()))
    return counts


def hourly_attempts(conn: Connection, clock: TxClock, hours: int) -> list[HourBucket]:
    """Delivered and failed attempts per hour, oldest hour first, the last one ending now.

    One pass over the attempts of those hours (found by the index on finish time), grouped
    by hour and status."""
    now = clock.now()
    end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    first = end - timedelta(hours=hours)
    bucket = _hour_of(conn, first)
    stmt = (
        select(bucket, a.c.status, func.count())
        .where(
            a.c.finished_at >= first,
            a.c.finished_at < end,
            a.c.status.in_((AttemptStatus.DELIVERED.value, *FAILED_ATTEMPTS)),
        )
        .group_by(bucket, a.c.status)
    )
    sent, failed = [0] * hours, [0] * hours
    for hour, status, n in conn.execute(stmt):
        if not 0 <= int(hour) < hours:
            continue
        tally = sent if status == AttemptStatus.DELIVERED.value else failed
        tally[int(hour)] += int(n)
    return [HourBucket(first + timedelta(hours=i), sent[i], failed[i]) for i in range(hours)]


def _hour_of(conn: Connection, first: datetime) -> ColumnElement[int]:
    """Whole hours from `first` to an attempt's finish, in whole seconds on both backends
    (SQLite keeps UTC text; `first` is on the hour, so truncating seconds keeps the hour)."""
    start = int(first.timestamp())
    if conn.dialect.name == "postgresql":
        epoch = func.floor(func.extract("epoch", a.c.finished_at))
    else:
        # Whole seconds of the stored text: SQLite would round its microseconds to
        # milliseconds first, moving 11:59:59.999999 into the next hour.
        epoch = func.strftime("%s", func.substr(a.c.finished_at, 1, 19))
    seconds: ColumnElement[int] = cast(epoch, BigInteger)
    return ((seconds - start) // 3600).label("hour")


def failed_ids(conn: Connection, query: DeliveryQuery, limit: int) -> tuple[list[int], int]:
    """The failed rows the history filter matches, oldest first (at most `limit`), and how many
    there are in all."""
    # The history's own state filter: a literal with the index's predicate, so the failed rows
    # are read from the index of failed and skipped ones on both backends.
    conditions = [
        *history_conditions(query),
        *history_conditions(DeliveryQuery(state=State.FAILED)),
    ]
    total = conn.scalar(select(func.count()).select_from(HISTORY_ROWS).where(*conditions)) or 0
    ids = conn.scalars(
        select(d.c.id).select_from(HISTORY_ROWS).where(*conditions).order_by(d.c.id).limit(limit)
    )
    return [int(i) for i in ids], int(total)
