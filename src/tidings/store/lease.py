"""The lease (C1): due rows of one channel set `sending`, `attempts+1`, `next_attempt_at = now +
lease`, a fresh token and owner, in one statement, and their events read.

No lock outlives the claim's transaction; the send happens after commit.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Executable,
    and_,
    bindparam,
    exists,
    func,
    not_,
    select,
    update,
)
from sqlalchemy.engine import Connection

from tidings.core.model import Channel, Claim, ClaimedDelivery, Event
from tidings.core.states import State
from tidings.store import rows
from tidings.store.clock import TxClock
from tidings.store.dialect import Dialect
from tidings.store.dialects import dialect_for
from tidings.store.schema import UTCDateTime, channels, deliveries
from tidings.store.transitions import guard, state_in, target

d = deliveries


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
    stmt = _lease_statement(dialect, channel.max_age_s is not None, by_id)
    leased = [rows.delivery(r) for r in conn.execute(stmt, params).mappings()]
    if not leased:
        return None
    by_event = _events(conn, dialect, {x.event_id for x in leased}, known or {})
    items = sorted(
        (ClaimedDelivery(x, by_event[x.event_id]) for x in leased),
        key=lambda item: item.delivery.id,
    )
    claim = Claim(token, owner, channel, items, items[0].delivery.next_attempt_at)
    if by_id and not dialect.lease_sets_batch:
        claim = _assign_batch(conn, dialect, claim)
    return claim


def _events(
    conn: Connection, dialect: Dialect, wanted: set[int], known: Mapping[int, Event]
) -> dict[int, Event]:
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
def _lease_statement(dialect: Dialect, expires: bool, by_id: bool) -> Executable:
    """Built once per shape: its values are bound at execution, so a claim neither rebuilds
    the expression nor recomputes its cache key."""
    now = bindparam("now", type_=UTCDateTime)
    due_at = dialect.claim_order_time(d.c.next_attempt_at, by_id)
    claimable = and_(d.c.channel_id == bindparam("channel"), guard("claim", now=now, due_at=due_at))
    # C7: the channel must still be enabled when the rows are taken, whatever was read before.
    enabled = exists().where(channels.c.id == d.c.channel_id, channels.c.enabled)
    # Rows the sweep would end (C2 spent leases, O5 expired) are never leased, swept or not.
    spent = and_(state_in([State.SENDING]), d.c.attempts >= bindparam("max_attempts"))
    sendable: list[ColumnElement[bool]] = [not_(spent)]
    if expires:
        sendable.append(d.c.created_at > bindparam("born_after", type_=UTCDateTime))
    order = (d.c.id,) if by_id else (d.c.next_attempt_at, d.c.id)
    picked = (
        select(d.c.id)
        .where(claimable, enabled, *sendable)
        .order_by(*order)
        .limit(bindparam("limit"))
        .with_for_update(skip_locked=True)
        .cte("picked")
        .prefix_with("MATERIALIZED", dialect="postgresql")
    )
    values: dict[str, Any] = {
        "state": target("claim"),
        "attempts": d.c.attempts + 1,
        "next_attempt_at": bindparam("lease_end", type_=UTCDateTime),
        "lease_token": bindparam("token"),
        "lease_owner": bindparam("owner"),
    }
    if by_id and dialect.lease_sets_batch:
        # D3 in the same statement: the batch id is the smallest id taken, set only where
        # still null.
        first = select(func.min(picked.c.id)).scalar_subquery()
        values["batch_id"] = func.coalesce(d.c.batch_id, first)
    return update(d).where(dialect.leased_ids(picked)).values(values).returning(*d.c)


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
