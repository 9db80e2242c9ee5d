"""Bulk replay (M3): the ended deliveries a filter matches back to pending, in one transaction,
at most a page of them per request (oldest first, paged by id), each with its resend audit
row; a request id requeues once, and a dry run only counts.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import ColumnElement, func, select, update
from sqlalchemy.engine import Connection

from tidings.core.errors import Conflict
from tidings.core.model import DeliveryQuery, ReplayQuery, ReplayResult
from tidings.core.states import RESENDABLE
from tidings.store.clock import TxClock
from tidings.store.dialects import dialect_for
from tidings.store.history import _conditions as history_conditions
from tidings.store.schema import bulk_resends, deliveries, events, resends
from tidings.store.transitions import guard, state_in, target

#: At most this many rows per request: a hard bound on one transaction.
MAX_PAGE = 10_000

d = deliveries


def count(conn: Connection, clock: TxClock, query: ReplayQuery) -> ReplayResult:
    """A dry run: how many rows match from `after_id` on, and where a page of them ends."""
    matched = conn.scalar(select(func.count()).select_from(_JOINED).where(*_matching(query)))
    last = _page_ids(conn, query)
    return ReplayResult(
        matched=int(matched or 0),
        requeued=0,
        dry_run=True,
        next_after_id=last[-1] if int(matched or 0) > len(last) else None,
    )


def resend(
    conn: Connection, clock: TxClock, query: ReplayQuery, operator: str, request_id: str
) -> ReplayResult:
    """Requeue a page of the matching rows, once per `request_id`: the same request again
    answers what the first did; the id reused for another filter is a conflict.

    The request's row is written first: its unique id makes a concurrent twin wait for this
    transaction, then find the row and answer as a replay (as M1 does for one row)."""
    described = _describe(query)
    claimed = conn.execute(
        dialect_for(conn)
        .insert_ignoring_conflict(bulk_resends, "request_id")
        .values(
            request_id=request_id,
            operator=operator,
            query=described,
            matched=0,
            requeued=0,
            at=clock.at(),
        )
    ).rowcount
    if not claimed:
        earlier = (
            conn.execute(select(bulk_resends).where(bulk_resends.c.request_id == request_id))
            .mappings()
            .one()
        )
        return _replayed(earlier, described, request_id)
    matched = int(
        conn.scalar(select(func.count()).select_from(_JOINED).where(*_matching(query))) or 0
    )
    ids = _page_ids(conn, query)
    requeued = _requeue(conn, clock, ids, operator, request_id)
    next_after = ids[-1] if matched > len(ids) else None
    conn.execute(
        update(bulk_resends)
        .where(bulk_resends.c.request_id == request_id)
        .values(matched=matched, requeued=requeued, next_after_id=next_after)
    )
    return ReplayResult(matched, requeued, dry_run=False, next_after_id=next_after)


def _requeue(
    conn: Connection, clock: TxClock, ids: list[int], operator: str, request_id: str
) -> int:
    if not ids:
        return 0
    dialect = dialect_for(conn)
    changed = conn.execute(
        update(d)
        .where(dialect.ids_in(d.c.id, ids), guard("resend"))
        .values(
            state=target("resend"),
            attempts=0,
            next_attempt_at=clock.at(),
            last_error=None,
            failure=None,
            skip_reason=None,
            lease_token=None,
            lease_owner=None,
        )
        .returning(d.c.id, d.c.channel_id)
    ).all()
    if not changed:
        return 0
    now = clock.now()
    conn.execute(
        resends.insert(),
        [
            {
                "delivery_id": delivery_id,
                "operator": operator,
                "request_id": f"{request_id}:{delivery_id}",
                "at": now,
            }
            for delivery_id, _ in changed
        ],
    )
    dialect.announce(conn, {channel_id for _, channel_id in changed})
    return len(changed)


_JOINED = d.join(events, events.c.id == d.c.event_id)


def _matching(query: ReplayQuery) -> list[ColumnElement[bool]]:
    """The history filters it shares (M2), and its own: ended states, failure, paging."""
    shared = DeliveryQuery(
        channel_id=query.channel_id,
        event_kind=query.event_kind,
        tenant=query.tenant,
        since=query.since,
        until=query.until,
    )
    found = [state_in(query.states & RESENDABLE), d.c.id > query.after_id]
    if query.failure is not None:
        found.append(d.c.failure == query.failure.value)
    return found + history_conditions(shared)


def _page_ids(conn: Connection, query: ReplayQuery) -> list[int]:
    stmt = (
        select(d.c.id)
        .select_from(_JOINED)
        .where(*_matching(query))
        .order_by(d.c.id)
        .limit(MAX_PAGE)
    )
    return [int(i) for i in conn.scalars(stmt)]


def _describe(query: ReplayQuery) -> str:
    """The filter as stored with the request, to tell a repeat from a reused id."""
    doc: dict[str, Any] = {
        "states": sorted(s.value for s in query.states),
        "channel_id": query.channel_id,
        "failure": None if query.failure is None else query.failure.value,
        "event_kind": query.event_kind,
        "tenant": query.tenant,
        "since": None if query.since is None else query.since.isoformat(),
        "until": None if query.until is None else query.until.isoformat(),
        "after_id": query.after_id,
    }
    return json.dumps(doc, sort_keys=True)


def _replayed(row: Any, described: str, request_id: str) -> ReplayResult:
    if row["query"] != described:
        raise Conflict(f"request id {request_id!r} was already used for another resend")
    return ReplayResult(
        matched=row["matched"],
        requeued=row["requeued"],
        dry_run=False,
        next_after_id=row["next_after_id"],
        replayed=True,
    )
