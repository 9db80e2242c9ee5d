"""The clock of one transaction (C4).

PostgreSQL: the database's `now()` (the transaction's timestamp), so every dispatcher on
every host agrees on when a lease ends. SQLite lives in one file on one host, so the
application clock is the database clock there. Tests pass a fixed `now` instead.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from sqlalchemy import ColumnElement, Interval, bindparam, func, literal, select, type_coerce
from sqlalchemy.engine import Connection

from tidings.store.dialects import dialect_for
from tidings.store.schema import UTCDateTime

AppClock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


class TxClock:
    def __init__(self, conn: Connection, fixed: datetime | None, app_clock: AppClock) -> None:
        self._conn = conn
        self._database_clock = fixed is None and dialect_for(conn).database_clock
        self._value: datetime | None = None
        if fixed is not None:
            self._value = fixed.astimezone(UTC)
        elif not self._database_clock:
            self._value = app_clock().astimezone(UTC)

    def now(self) -> datetime:
        """The transaction's time as a Python value, read once from PostgreSQL if needed.

        Read there as `clock_timestamp()`, the moment of reading: a claim reads it after it
        holds the channel's bucket, so its rate math is not skewed by time spent waiting.
        """
        if self._value is None:
            value = self._conn.scalar(select(func.clock_timestamp(type_=UTCDateTime)))
            assert value is not None
            self._value = value
        return self._value

    @property
    def unread(self) -> bool:
        """True while `now()` would still ask the database (a caller may fold that read into
        a statement it sends anyway, then `adopt` the value)."""
        return self._value is None

    def adopt(self, value: datetime) -> None:
        """Take `clock_timestamp()` read by a caller's own statement as this transaction's now."""
        if self._value is None:
            self._value = value

    def now_param(self) -> dict[str, datetime]:
        """The parameters for `prepared_now(self.unread)`: none while the database keeps the
        time, else `now`."""
        return {} if self.unread else {"now": self.now()}

    def at(self, offset_s: float = 0.0) -> ColumnElement[datetime]:
        """`now + offset_s` as a SQL expression, computed by the database when it is the clock."""
        if self._database_clock and self._value is None:
            now = func.now()
            if offset_s:
                return type_coerce(
                    now + literal(timedelta(seconds=offset_s), Interval()), UTCDateTime
                )
            return type_coerce(now, UTCDateTime)
        return literal(self.now() + timedelta(seconds=offset_s), UTCDateTime)


def prepared_now(database_clock: bool) -> ColumnElement[datetime]:
    """`now` in a statement built once and run many times: PostgreSQL's `now()` when the
    database is the clock and has not been read, else the bound parameter `:now` that
    `TxClock.now_param` supplies."""
    if database_clock:
        return type_coerce(func.now(), UTCDateTime)
    return bindparam("now", type_=UTCDateTime)
