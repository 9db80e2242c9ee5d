"""Aggregates the admin UI shows: channel health, deliveries by state, attempts per hour over a
day, and the failed rows a history filter matches (bulk resend).

Portable SQLAlchemy Core but for the hour of a timestamp, which each backend computes its own
way. Counts that could read every row are bounded (see `history.count_matching`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Select,
    cast,
    func,
    literal_column,
    select,
    type_coerce,
)
from sqlalchemy.engine import Connection

from tidings.core.model import DeliveryQuery
from tidings.core.states import AttemptStatus, State
from tidings.store.clock import TxClock

# The history list's own filter, so a bulk resend preview counts exactly what the list shows.
from tidings.store.history import _JOINED as HISTORY_ROWS
from tidings.store.history import EXACT_TOTAL_UP_TO, count_matching
from tidings.store.history import _conditions as history_conditions
from tidings.store.schema import (
    UTCDateTime,
    attempts,
    channels,
    deliveries,
    is_ended,
    is_live,
)

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
#: A channel's last success is the latest send among its newest sent deliveries, this many:
#: bounded however many it ever sent. Only a retry that succeeded after this many newer
#: deliveries had been sent is left out, and it succeeded at most that long ago.
LAST_SUCCESS_AMONG = 100


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


def channel_health(
    conn: Connection, clock: TxClock, channel_ids: Sequence[int] | None = None
) -> dict[int, ChannelHealth]:
    """Per channel (those of `channel_ids`, else every one): last delivered, failed attempts
    in the last hour, open rows, oldest open. For given channels each figure is read through
    that channel's own rows (its newest ended rows for the last delivery, its live ones for
    what is open), so a page of channels costs the same however many deliveries they and
    the others hold."""
    hour_ago = clock.now() - timedelta(hours=1)

    def of_page(query: Select[Any]) -> Select[Any]:
        return query if channel_ids is None else query.where(d.c.channel_id.in_(channel_ids))

    newest_sent = (
        select(d.c.sent_at)
        .where(
            d.c.channel_id == channels.c.id,
            d.c.state == literal_column(f"'{State.SENT.value}'"),
            is_ended(),  # the predicate of the index of a channel's ended rows, as written
        )
        .order_by(d.c.id.desc())
        .limit(LAST_SUCCESS_AMONG)
        .correlate(channels)
        .subquery()
    )
    last = select(func.max(newest_sent.c.sent_at)).scalar_subquery()
    last_of = select(channels.c.id, type_coerce(last, UTCDateTime))
    if channel_ids is not None:
        last_of = last_of.where(channels.c.id.in_(channel_ids))
    last_sent: dict[int, datetime | None] = dict(conn.execute(last_of).all())
    open_rows = {
        channel_id: (count, oldest)
        for channel_id, count, oldest in conn.execute(
            of_page(
                select(
                    d.c.channel_id,
                    func.count(),
                    type_coerce(func.min(d.c.created_at), UTCDateTime),
                )
                .where(d.c.state.in_(OPEN_STATES))
                .group_by(d.c.channel_id)
            )
        ).all()
    }
    failures: dict[int, int] = dict(
        conn.execute(
            of_page(
                select(d.c.channel_id, func.count())
                .select_from(a.join(d, d.c.id == a.c.delivery_id))
                .where(a.c.status.in_(FAILED_ATTEMPTS), a.c.finished_at >= hour_ago)
                .group_by(d.c.channel_id)
            )
        ).all()
    )
    ids = channel_ids if channel_ids is not None else conn.scalars(select(channels.c.id))
    found: dict[int, ChannelHealth] = {}
    for channel_id in ids:
        pending, oldest = open_rows.get(channel_id, (0, None))
        found[int(channel_id)] = ChannelHealth(
            channel_id=int(channel_id),
            last_success_at=last_sent.get(channel_id),
            failures_last_hour=int(failures.get(channel_id, 0)),
            pending=int(pending or 0),
            oldest_pending_at=oldest,
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
