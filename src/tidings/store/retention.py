"""Retention (R1): ended deliveries (with their attempt and resend rows), events without a
delivery, inbox messages and bulk resend records older than their retention go, in small
batches, one purger at a time cluster-wide. Rows `pending` or `sending` are never touched.

Events go when they are past their retention and no delivery is left: those whose last
deliveries a batch deletes (checked by id), and those that never had one (matched no
channel), found by a sweep over events in id order that goes on from where the last batch
stopped (`events_after`) and starts over once it reaches events too young to go. No batch
looks at more rows than its limit, so its cost stays flat however large the tables grow.

A batch can be archived first (`Archive`: a callback that takes the rows as plain JSON
documents, secrets never among them) within the transaction that deletes them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, exists, func, or_, select
from sqlalchemy.engine import Connection

from tidings.core.states import FINAL
from tidings.store.clock import TxClock
from tidings.store.dialects import dialect_for
from tidings.store.schema import (
    attempts,
    bulk_resends,
    channels,
    deliveries,
    events,
    inbox_messages,
)
from tidings.store.transitions import state_in

#: Rows one batch deletes at most: short transactions that never hold claims up for long.
BATCH = 250

Archive = Callable[[str, Mapping[str, Any]], None]

d = deliveries


@dataclass(frozen=True, slots=True)
class Purged:
    deliveries: int = 0
    events: int = 0
    other: int = 0
    #: Another purger holds the cluster-wide turn; nothing was done.
    busy: bool = False
    #: Where the next batch's sweep for events without a delivery goes on; None: the sweep
    #: reached events too young to go (or was not asked for).
    events_after: int | None = None

    @property
    def rows(self) -> int:
        return self.deliveries + self.events + self.other


def purge_batch(
    conn: Connection,
    clock: TxClock,
    default_days: float,
    archive: Archive | None = None,
    limit: int = BATCH,
    events_after: int | None = 0,
) -> Purged:
    """One batch: at most `limit` deliveries, the events they leave without a delivery, up
    to `limit` events swept from `events_after` on (None: no sweep), and the small tables;
    `busy` when another process is purging."""
    if not dialect_for(conn).try_exclusive(conn, "retention"):
        return Purged(busy=True, events_after=events_after)
    now = clock.now()
    ids = conn.scalars(
        select(d.c.id).where(_expired(conn, now, default_days)).order_by(d.c.id).limit(limit)
    ).all()
    if ids and archive is not None:
        _archive_deliveries(conn, list(ids), archive)
    gone, left_events = _delete_deliveries(conn, list(ids)) if ids else (0, [])
    cutoff = now - timedelta(days=default_days)
    swept, next_after = (
        ([], None) if events_after is None else _sweep(conn, cutoff, events_after, limit)
    )
    orphans = _without_delivery(conn, cutoff, sorted({*left_events, *swept}))
    if orphans and archive is not None:
        for row in conn.execute(select(events).where(events.c.id.in_(orphans))).mappings():
            archive("event", _plain(row))
    events_gone = (
        conn.execute(delete(events).where(events.c.id.in_(orphans))).rowcount if orphans else 0
    )
    other = _purge_small(conn, cutoff, limit)
    return Purged(gone, events_gone, other, events_after=next_after)


def _sweep(
    conn: Connection, cutoff: datetime, after: int, limit: int
) -> tuple[list[int], int | None]:
    """The next `limit` events past their retention after id `after`, and where the sweep
    goes on: None once it met an event too young or the end of the table."""
    found = conn.execute(
        select(events.c.id, events.c.created_at)
        .where(events.c.id > after)
        .order_by(events.c.id)
        .limit(limit)
    ).all()
    old = [int(i) for i, created in found if _before(created, cutoff)]
    ended = len(found) < limit or len(old) < len(found)
    return old, None if ended or not old else old[-1]


def _before(when: datetime, cutoff: datetime) -> bool:
    if when.tzinfo is None:  # SQLite hands back naive UTC
        cutoff = cutoff.replace(tzinfo=None)
    return when < cutoff


def _without_delivery(conn: Connection, cutoff: datetime, ids: list[int]) -> list[int]:
    """Those of `ids` past their retention that no delivery refers to."""
    if not ids:
        return []
    has_delivery = exists().where(d.c.event_id == events.c.id)
    stmt = select(events.c.id).where(
        dialect_for(conn).ids_in(events.c.id, ids), events.c.created_at < cutoff, ~has_delivery
    )
    return [int(i) for i in conn.scalars(stmt)]


def due(conn: Connection, clock: TxClock, default_days: float) -> dict[str, int]:
    """What a purge would delete now: ended deliveries per channel name, and events."""
    now = clock.now()
    found = conn.execute(
        select(channels.c.name, func.count())
        .select_from(d.join(channels, channels.c.id == d.c.channel_id))
        .where(_expired(conn, now, default_days))
        .group_by(channels.c.name)
    ).all()
    counted = {str(name): int(n) for name, n in found}
    cutoff = now - timedelta(days=default_days)
    orphans = select(func.count()).select_from(_orphan_events(cutoff).subquery())
    counted["(events without a delivery)"] = int(conn.scalar(orphans) or 0)
    return counted


def _expired(conn: Connection, now: datetime, default_days: float) -> ColumnElement[bool]:
    """Ended deliveries older than their channel's retention."""
    overrides = {
        int(i): float(days)
        for i, days in conn.execute(
            select(channels.c.id, channels.c.retention_days).where(
                channels.c.retention_days.is_not(None)
            )
        )
    }
    older: list[ColumnElement[bool]] = [
        and_(d.c.channel_id.not_in(list(overrides)), d.c.created_at < _ago(now, default_days))
    ]
    older += [
        and_(d.c.channel_id == channel_id, d.c.created_at < _ago(now, days))
        for channel_id, days in overrides.items()
    ]
    return and_(state_in(FINAL), or_(*older))


def _ago(now: datetime, days: float) -> datetime:
    return now - timedelta(days=days)


def _orphan_events(cutoff: datetime) -> Any:
    has_delivery = exists().where(d.c.event_id == events.c.id)
    return (
        select(events.c.id).where(events.c.created_at < cutoff, ~has_delivery).order_by(events.c.id)
    )


def _delete_deliveries(conn: Connection, ids: list[int]) -> tuple[int, list[int]]:
    """Their attempt and resend rows go with them (ON DELETE CASCADE). The state is checked
    again: a resend may have reopened one since it was picked. Returns how many went and
    their events."""
    dialect = dialect_for(conn)
    stmt = delete(d).where(dialect.ids_in(d.c.id, ids), state_in(FINAL)).returning(d.c.event_id)
    event_ids = [int(i) for i in conn.scalars(stmt)]
    return len(event_ids), event_ids


def _purge_small(conn: Connection, cutoff: datetime, limit: int) -> int:
    gone = 0
    small = ((inbox_messages, inbox_messages.c.created_at), (bulk_resends, bulk_resends.c.at))
    for table, when in small:
        picked = select(table.c.id).where(when < cutoff).order_by(table.c.id).limit(limit)
        ids = conn.scalars(picked).all()
        if ids:
            gone += int(conn.execute(delete(table).where(table.c.id.in_(ids))).rowcount)
    return gone


def _archive_deliveries(conn: Connection, ids: list[int], archive: Archive) -> None:
    for row in conn.execute(select(d).where(d.c.id.in_(ids)).order_by(d.c.id)).mappings():
        archive("delivery", _plain(row))
    log = select(attempts).where(attempts.c.delivery_id.in_(ids)).order_by(attempts.c.id)
    for row in conn.execute(log).mappings():
        archive("attempt", _plain(row))


#: What `tidings archive` exports, by the name each line carries, with the column that dates it.
EXPORTED = {
    "event": (events, events.c.created_at),
    "delivery": (d, d.c.created_at),
    "attempt": (attempts, attempts.c.started_at),
}


def export_page(
    conn: Connection, name: str, before: datetime, after_id: int, limit: int
) -> list[dict[str, Any]]:
    """Rows of one exported table created before `before`, after `after_id`, oldest first
    (a page at a time, so an archive of years takes little memory)."""
    table, when = EXPORTED[name]
    stmt = (
        select(table).where(when < before, table.c.id > after_id).order_by(table.c.id).limit(limit)
    )
    return [_plain(row) for row in conn.execute(stmt).mappings()]


def _plain(row: Mapping[Any, Any]) -> dict[str, Any]:
    return {str(k): v.isoformat() if isinstance(v, datetime) else v for k, v in row.items()}
