"""The lease (C1): due rows of one channel set `sending`, `attempts+1`, `next_attempt_at = now +
lease`, a fresh token and owner, and their events read.

A row whose earlier lease ran out without an outcome is taken over: that lease is audited
(`lease_lost`, with the worker that held it) and counted in `lost_leases`, not as an attempt.
No lock outlives the claim's transaction; the send happens after commit.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    and_,
    bindparam,
    case,
    exists,
    not_,
    select,
    update,
)
from sqlalchemy.engine import Connection

from tidings.core.model import AttemptRecord, Channel, Claim, ClaimedDelivery, Event
from tidings.core.states import AttemptStatus, State
from tidings.store import rows
from tidings.store.clock import TxClock
from tidings.store.dialect import PRIOR_OWNER, PRIOR_STATE, Dialect, LeaseShape
from tidings.store.dialects import dialect_for
from tidings.store.outcomes import insert_attempts
from tidings.store.schema import UTCDateTime, channels, deliveries
from tidings.store.transitions import guard, state_in, target

d = deliveries
#: What a lost lease's audit row says: the worker holding it neither reported nor gave it back.
LEASE_LOST_ERROR = "lease ended without an outcome (the worker crashed or stalled?)"


def lease(
    conn: Connection,
    clock: TxClock,
    channel: Channel,
    limit: int,
    lease_s: float,
    owner: str,
    *,
    by_id: bool,
    known: Mapping[int, Event] | None = None,
) -> Claim | None:
    """Lease up to `limit` due rows, oldest due first (or by id, for a digest: D2).

    Events are immutable (E3): those in `known` (a caller's events from earlier claims) are
    not read again, the rest in one more statement — an event published to many channels is
    claimed once per channel.
    """
    dialect = dialect_for(conn)
    token = secrets.token_hex(16)
    now = clock.now()
    params: dict[str, Any] = {
        "channel": channel.id,
        "now": now,
        "max_attempts": channel.max_attempts,
        "limit": limit,
        "lease_end": now + timedelta(seconds=lease_s),
        "token": token,
        "owner": owner,
    }
    if channel.max_age_s is not None:
        params["born_after"] = now - timedelta(seconds=channel.max_age_s)
    taken = dialect.lease(conn, _shape(dialect, channel.max_age_s is not None, by_id), params)
    if not taken:
        return None
    insert_attempts(conn, _lost_lease_rows(taken, now))
    leased = [rows.delivery(r) for r in taken]
    by_event = events_of(conn, dialect, {x.event_id for x in leased}, known or {})
    items = sorted(
        (ClaimedDelivery(x, by_event[x.event_id]) for x in leased),
        key=lambda item: item.delivery.id,
    )
    claim = Claim(token, owner, channel, items, items[0].delivery.next_attempt_at)
    if by_id and not dialect.lease_sets_batch:
        claim = _assign_batch(conn, dialect, claim)
    return claim


def events_of(
    conn: Connection, dialect: Dialect, wanted: set[int], known: Mapping[int, Event]
) -> dict[int, Event]:
    """The events `wanted`, from `known` where there, the rest read in one statement."""
    found: dict[int, Event] = {}
    missing: list[int] = []
    for event_id in sorted(wanted):
        event = known.get(event_id)  # one lookup: the caller may forget it meanwhile
        if event is None:
            missing.append(event_id)
        else:
            found[event_id] = event
    if missing:
        read = conn.execute(dialect.events_by_id, {"ids": missing}).mappings()
        found.update((e.id, e) for e in map(rows.event, read))
    return found


@functools.cache
def _shape(dialect: Dialect, expires: bool, by_id: bool) -> LeaseShape:
    """Built once per shape: its values are bound at execution, so a claim neither rebuilds
    the expression nor recomputes its cache key."""
    now = bindparam("now", type_=UTCDateTime)
    due_at = dialect.claim_order_time(d.c.next_attempt_at, by_id)
    claimable = and_(d.c.channel_id == bindparam("channel"), guard("claim", now=now, due_at=due_at))
    # C7: the channel must still be enabled when the rows are taken, whatever was read before.
    enabled = exists().where(channels.c.id == d.c.channel_id, channels.c.enabled)
    lost = state_in([State.SENDING])  # a lease that ran out without an outcome
    # Rows the sweep would end (C2 poison rows, O5 expired) are never leased, swept or not.
    poison = and_(lost, d.c.lost_leases >= bindparam("max_attempts"))
    sendable: list[ColumnElement[bool]] = [not_(poison)]
    if expires:
        sendable.append(d.c.created_at > bindparam("born_after", type_=UTCDateTime))
    order = (d.c.id,) if by_id else (d.c.next_attempt_at, d.c.id)
    picked = (
        select(d.c.id, d.c.state.label(PRIOR_STATE), d.c.lease_owner.label(PRIOR_OWNER))
        .where(claimable, enabled, *sendable)
        .order_by(*order)
        .limit(bindparam("limit"))
        .with_for_update(skip_locked=True)
    )
    values: dict[str, Any] = {
        "state": target("claim"),
        # A lost lease's attempt is revoked (it may never have sent) and this one counted.
        "attempts": case((lost, d.c.attempts), else_=d.c.attempts + 1),
        "lost_leases": case((lost, d.c.lost_leases + 1), else_=d.c.lost_leases),
        "next_attempt_at": bindparam("lease_end", type_=UTCDateTime),
        "lease_token": bindparam("token"),
        "lease_owner": bindparam("owner"),
    }
    return LeaseShape(picked, values, by_id)


def _lost_lease_rows(rows_leased: list[Any], now: datetime) -> list[AttemptRecord]:
    """An audit row for each lease this claim took over from a worker that never reported."""
    return [
        AttemptRecord(
            delivery_id=r["id"],
            worker_id=r[PRIOR_OWNER] or "unknown",
            status=AttemptStatus.LEASE_LOST,
            started_at=now,
            finished_at=now,
            error=LEASE_LOST_ERROR,
            batch_id=r["batch_id"],
        )
        for r in rows_leased
        if r[PRIOR_STATE] == State.SENDING.value
    ]


def _assign_batch(conn: Connection, dialect: Dialect, claim: Claim) -> Claim:
    """D3: the batch id is the smallest delivery id, kept across retries (set only where
    still null), for a dialect whose lease does not set it."""
    batch_id = min(claim.ids)
    conn.execute(
        update(d)
        .where(dialect.ids_in(d.c.id, claim.ids), d.c.batch_id.is_(None))
        .values(batch_id=batch_id)
    )
    items = [
        replace(item, delivery=replace(item.delivery, batch_id=item.delivery.batch_id or batch_id))
        for item in claim.items
    ]
    return replace(claim, items=items)
