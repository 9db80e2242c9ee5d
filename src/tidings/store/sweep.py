"""The sweep of a channel's due rows that must not be leased as they are (C2, O5), audited.

`release_lost`: a lease ran out without an outcome; its attempt is revoked (it may never have
sent), it counts in `lost_leases`, and the row is claimable again. `exhaust_lost`: the row
has lost more than `max_attempts` leases — it keeps killing workers — and ends. `expire`:
the row is older than the channel's `max_age_s` and is not sent late.
"""

from __future__ import annotations

import functools
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Interval,
    Text,
    and_,
    bindparam,
    case,
    func,
    or_,
    select,
    type_coerce,
    update,
)
from sqlalchemy.engine import Connection

from tidings.core.model import AttemptRecord, Channel
from tidings.core.states import AttemptStatus, Failure
from tidings.store.clock import TxClock, prepared_now
from tidings.store.failed import Failed, after_failed
from tidings.store.outcomes import insert_attempts
from tidings.store.schema import UTCDateTime, deliveries, is_live
from tidings.store.transitions import guard, target

SWEEPER_ID = "tidings:sweeper"

d = deliveries


def sweep(conn: Connection, clock: TxClock, channel: Channel) -> int:
    """End or release the channel's due rows that must not be leased as they are, and audit
    each; how many rows changed."""
    database_clock = clock.unread
    params: dict[str, Any] = {
        "channel": channel.id,
        "max_attempts": channel.max_attempts,
        **clock.now_param(),
    }
    expires = channel.max_age_s is not None
    if channel.max_age_s is not None:
        max_age = timedelta(seconds=channel.max_age_s)
        if database_clock:
            params["max_age"] = max_age
        else:
            params["born_by"] = clock.now() - max_age
        params["expired_error"] = f"not sent: older than max_age_s ({channel.max_age_s:g} s)"
    swept = conn.execute(_statement(database_clock, expires), params).mappings().all()
    if not swept:
        return 0
    now = clock.now()
    insert_attempts(conn, [_audit(r, now) for r in swept])
    ended = [
        Failed(r["id"], r["event_id"], channel.id, r["failure"], r["last_error"] or "")
        for r in swept
        if r["failure"] is not None
    ]
    after_failed(conn, clock, ended)
    return len(swept)


def _audit(row: Any, now: datetime) -> AttemptRecord:
    """An expired row is the sweep's own doing; a lost lease is the worker's that held it."""
    expired = row["failure"] == Failure.EXPIRED.value
    return AttemptRecord(
        delivery_id=row["id"],
        worker_id=SWEEPER_ID if expired else row["lease_owner"] or "unknown",
        status=AttemptStatus.EXPIRED if expired else AttemptStatus.LEASE_LOST,
        started_at=now,
        finished_at=now,
        error=row["last_error"],
        batch_id=row["batch_id"],
    )


@functools.cache
def _statement(database_clock: bool, expires: bool) -> Any:
    """Built once per shape (a dispatcher sweeps each channel every few seconds). One UPDATE
    makes all three transitions, each row's target chosen by which guard it meets."""
    now = prepared_now(database_clock)
    lost = guard("release_lost", now=now)  # exhaust_lost has the same guard
    spent = and_(lost, d.c.lost_leases >= bindparam("max_attempts"))  # this loss is one more
    lost_text = func.coalesce(d.c.lease_owner, "a worker") + (
        " did not report before its lease ended (crashed or stalled?)"
    )
    state: list[tuple[ColumnElement[bool], str]] = [(spent, target("exhaust_lost"))]
    failure: list[tuple[ColumnElement[bool], str]] = [(spent, Failure.EXHAUSTED.value)]
    error: list[tuple[ColumnElement[bool], Any]] = []
    candidates: ColumnElement[bool] = lost
    if expires:
        born_by: ColumnElement[Any] = (
            type_coerce(func.now() - bindparam("max_age", type_=Interval), UTCDateTime)
            if database_clock
            else bindparam("born_by", type_=UTCDateTime)
        )
        expired = and_(guard("expire", now=now), d.c.created_at <= born_by)
        candidates = or_(lost, expired)
        state.insert(0, (expired, target("expire")))
        failure.insert(0, (expired, Failure.EXPIRED.value))
        error.append((expired, bindparam("expired_error", type_=Text)))
    # The live rows of the channel that are due, named as the claim index names them, so
    # the planner reads the index (it cannot prove the OR below implies its predicate).
    due = and_(d.c.channel_id == bindparam("channel"), is_live(), d.c.next_attempt_at <= now)
    targets = select(d.c.id).where(due, candidates).with_for_update(skip_locked=True)
    values = {
        "state": case(*state, else_=target("release_lost")),
        "failure": case(*failure, else_=None),
        "last_error": case(*error, else_=lost_text) if error else lost_text,
        "attempts": case(
            (lost, case((d.c.attempts > 0, d.c.attempts - 1), else_=0)), else_=d.c.attempts
        ),
        "lost_leases": case((lost, d.c.lost_leases + 1), else_=d.c.lost_leases),
    }
    return (
        update(d)
        .where(d.c.id.in_(targets.scalar_subquery()))
        .values(values)
        .returning(d.c.id, d.c.event_id, d.c.failure, d.c.last_error, d.c.batch_id, d.c.lease_owner)
    )
