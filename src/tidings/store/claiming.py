"""Claims (C1, C2, C6, D1–D3, O5): lease due rows in one short transaction, then send.

A claim first sweeps the channel's due rows that must not be sent (past the deadline, or
whose lease ran out after the last attempt), then leases at most the channel's budget:
`state=sending`, `attempts+1`, `next_attempt_at = now + lease` and a fresh lease token.
No lock outlives the transaction; the send happens after commit.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Executable,
    Interval,
    Text,
    and_,
    any_,
    bindparam,
    case,
    exists,
    func,
    not_,
    or_,
    select,
    type_coerce,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection
from sqlalchemy.sql.expression import UnaryExpression
from sqlalchemy.sql.operators import custom_op

from tidings.core import ratelimit
from tidings.core.model import AttemptRecord, Channel, Claim, ClaimedDelivery, Event
from tidings.core.states import AttemptStatus, Failure, Mode, State
from tidings.store import buckets, rows
from tidings.store.channel_ops import load_channel
from tidings.store.clock import TxClock, prepared_now
from tidings.store.dialect import ids_in, is_postgres
from tidings.store.outcomes import insert_attempts
from tidings.store.schema import (
    UTCDateTime,
    channels,
    deliveries,
    events,
    is_live,
    rate_buckets,
)

#: D2: a digest batch is a hard memory bound, clamped whatever a caller asks for.
MAX_DIGEST_BATCH = 500
SWEEPER_ID = "tidings:sweeper"

d = deliveries


def claim_realtime(
    conn: Connection,
    clock: TxClock,
    channel_id: int,
    limit: int,
    lease_s: float,
    owner: str,
    swept: bool = True,
    known: Mapping[int, Event] | None = None,
) -> Claim | None:
    """Lease up to `limit` due rows of a realtime channel, never more than its budget (C6).

    `swept=False` skips the sweep: a job draining a busy channel sweeps on its first claim
    and then now and again, not on every claim. Skipping is safe: the lease never takes a
    row the sweep would end; such a row waits for the next sweep.
    """
    channel, unlocked = _load_for_claim(conn, channel_id)
    if channel is None or not channel.enabled or channel.mode is not Mode.REALTIME or limit <= 0:
        return None
    if swept:
        sweep(conn, clock, channel)
    bucket: ratelimit.Bucket | None = None
    if unlocked is not None and channel.rate_per_min <= 0:
        bucket, read_at = unlocked
        clock.adopt(read_at)
    else:
        bucket = buckets.lock(conn, channel, clock)
    if bucket is None:
        return None
    now = clock.now()  # read after the bucket is ours (see TxClock.now)
    allowed = min(limit, buckets.budget(channel, bucket, now))
    if allowed <= 0:
        return None
    claim = _lease(conn, clock, channel, allowed, lease_s, owner, by_id=False, known=known)
    if claim is not None:
        buckets.spend(conn, channel, bucket, now, len(claim))
    return claim


def digest_due(conn: Connection, clock: TxClock, channel_id: int) -> bool:
    """D1: due when the oldest claimable row is at least `digest_period_s` old."""
    channel = load_channel(conn, channel_id)
    if channel is None or not channel.enabled:
        return False
    # "Is any due row old enough", not "is the oldest old enough": the same answer, but the
    # database stops at the first such row instead of reading every due row of a backlog.
    old_enough = (
        select(d.c.id)
        .where(_due(channel, clock), d.c.created_at <= clock.at(-channel.digest_period_s))
        .exists()
    )
    return bool(conn.scalar(select(old_enough)))


def claim_digest(
    conn: Connection,
    clock: TxClock,
    channel_id: int,
    limit: int,
    lease_s: float,
    owner: str,
    swept: bool = True,
    known: Mapping[int, Event] | None = None,
) -> Claim | None:
    """D2–D4: lease all claimable rows oldest first (≤ 500), one rate token for the message.

    `swept=False` skips the sweep, as for `claim_realtime`."""
    channel = load_channel(conn, channel_id)
    if channel is None or not channel.enabled or limit <= 0:
        return None
    if swept:
        sweep(conn, clock, channel)
    bucket = buckets.lock(conn, channel, clock)
    now = clock.now()
    if bucket is None or buckets.budget(channel, bucket, now) < 1:
        return None
    size = min(limit, MAX_DIGEST_BATCH)
    claim = _lease(conn, clock, channel, size, lease_s, owner, by_id=True, known=known)
    if claim is None:
        return None
    buckets.spend(conn, channel, bucket, now, 1)
    # PostgreSQL's lease set the batch id as it took the rows; SQLite's is set here.
    return claim if is_postgres(conn) else _assign_batch(conn, claim)


def take_token(conn: Connection, clock: TxClock, channel_id: int) -> bool:
    """D4: one more message of a digest already claimed spends one more token, if there is one."""
    channel = load_channel(conn, channel_id)
    if channel is None or not channel.enabled:
        return False
    bucket = buckets.lock(conn, channel, clock)
    if bucket is None:
        return False
    now = clock.now()
    if buckets.budget(channel, bucket, now) < 1:
        return False
    buckets.spend(conn, channel, bucket, now, 1)
    return True


def leased(conn: Connection, clock: TxClock, token: str) -> Claim | None:
    """The rows a lease token still holds (for a remote worker's report, W4)."""
    held = [
        rows.delivery(r)
        for r in conn.execute(
            select(d)
            .where(d.c.lease_token == token, d.c.state == State.SENDING.value)
            .order_by(d.c.id)
        ).mappings()
    ]
    if not held:
        return None
    channel = load_channel(conn, held[0].channel_id)
    if channel is None:
        return None
    found = conn.execute(select(events).where(events.c.id.in_({x.event_id for x in held})))
    by_id = {e.id: e for e in (rows.event(r) for r in found.mappings())}
    items = [ClaimedDelivery(delivery=x, event=by_id[x.event_id]) for x in held]
    owner = held[0].lease_owner or ""
    return Claim(token, owner, channel, items, held[0].next_attempt_at)


def _load_for_claim(
    conn: Connection, channel_id: int
) -> tuple[Channel | None, tuple[ratelimit.Bucket, datetime] | None]:
    """The channel, read at the start of a realtime claim, with its rate bucket as it stands
    and the time it was read (not locked: enough for a channel without a rate limit, which
    reads it only for a provider's pause; a limited channel locks it next).

    On PostgreSQL the same statement makes the claim's commit skip waiting for its WAL flush:
    should the database crash before the flush, the claim is forgotten and its rows are sent
    again, as after any lost lease (at least once, never lost). Publishes and outcomes still
    wait for it. (Riding along saves the claim a round trip of its own, as does the bucket.)
    """
    if not is_postgres(conn):
        return load_channel(conn, channel_id), None
    row = conn.execute(_CHANNEL_FOR_CLAIM, {"channel": channel_id}).mappings().first()
    if row is None:
        return None, None
    if row["bucket_updated_at"] is None:  # no bucket yet: the lock creates it
        return rows.channel(row), None
    bucket = ratelimit.Bucket(
        tokens=row["bucket_tokens"],
        updated_at=row["bucket_updated_at"],
        paused_until=row["bucket_paused_until"],
    )
    return rows.channel(row), (bucket, row["clock_now"])


_CHANNEL_FOR_CLAIM = (
    select(
        channels,
        func.set_config("synchronous_commit", "off", True).label("async_commit"),
        rate_buckets.c.tokens.label("bucket_tokens"),
        rate_buckets.c.updated_at.label("bucket_updated_at"),
        rate_buckets.c.paused_until.label("bucket_paused_until"),
        func.clock_timestamp(type_=UTCDateTime).label("clock_now"),
    )
    .select_from(channels.outerjoin(rate_buckets, rate_buckets.c.channel_id == channels.c.id))
    .where(channels.c.id == bindparam("channel"))
)


def _due(channel: Channel, clock: TxClock) -> ColumnElement[bool]:
    return and_(
        d.c.channel_id == channel.id,
        is_live(),
        d.c.next_attempt_at <= clock.at(),
    )


def _lease(
    conn: Connection,
    clock: TxClock,
    channel: Channel,
    limit: int,
    lease_s: float,
    owner: str,
    by_id: bool,
    known: Mapping[int, Event] | None = None,
) -> Claim | None:
    """Lease up to `limit` due rows, oldest due first (or by id, for a digest).

    Events are immutable (E3): those in `known` (a caller's events from earlier claims) are
    not read again, the rest in one more statement. An event published to many channels is
    claimed once per channel; decoding it every time cost ~4.5 us a row.
    """
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
    expires = channel.max_age_s is not None
    if channel.max_age_s is not None:
        params["born_after"] = now - timedelta(seconds=channel.max_age_s)
    postgres = is_postgres(conn)
    lease = _lease_statement(postgres, expires, by_id)
    leased = [rows.delivery_at(r) for r in conn.execute(lease, params)]
    if not leased:
        return None
    remembered = known or {}
    by_event: dict[int, Event] = {}
    missing: list[int] = []
    for event_id in sorted({x.event_id for x in leased}):
        event = remembered.get(event_id)  # one lookup: the caller may forget it meanwhile
        if event is None:
            missing.append(event_id)
        else:
            by_event[event_id] = event
    if missing:
        found = conn.execute(_events_by_id(postgres), {"ids": missing})
        by_event.update((e.id, e) for e in (rows.event_at(r) for r in found))
    items = [ClaimedDelivery(x, by_event[x.event_id]) for x in leased]
    items.sort(key=lambda item: item.delivery.id)
    return Claim(
        token=token,
        owner=owner,
        channel=channel,
        items=items,
        lease_expires_at=items[0].delivery.next_attempt_at,
    )


@functools.cache
def _events_by_id(postgres: bool) -> Executable:
    """Events by id; on PostgreSQL one array parameter, so the statement text (and its
    prepared plan) is the same however many ids."""
    if postgres:
        return select(events).where(events.c.id == any_(bindparam("ids", type_=ARRAY(BigInteger))))
    return select(events).where(events.c.id.in_(bindparam("ids", expanding=True)))


@functools.cache
def _lease_statement(postgres: bool, expires: bool, by_id: bool) -> Executable:
    """The lease, built once per shape: its values are bound at execution, so a claim neither
    rebuilds the expression nor recomputes its cache key."""
    now = bindparam("now", type_=UTCDateTime)
    due_at: ColumnElement[Any] = d.c.next_attempt_at
    if by_id and not postgres:
        # SQLite, without statistics, prefers the claim index (it constrains one more
        # column) and then sorts every due row by id; a unary + (a no-op SQLite documents
        # for this) keeps the time off the index, so the live rows' id index gives the order.
        due_at = type_coerce(UnaryExpression(due_at, operator=custom_op("+")), UTCDateTime)
    due = [
        d.c.channel_id == bindparam("channel"),
        is_live(),
        due_at <= now,
    ]
    # C7: the channel must still be enabled when the rows are taken, whatever was read before.
    enabled = exists().where(channels.c.id == d.c.channel_id, channels.c.enabled)
    # Rows the sweep would end (C2 spent leases, O5 expired) are never leased, swept or not.
    spent = and_(d.c.state == State.SENDING.value, d.c.attempts >= bindparam("max_attempts"))
    sendable = [not_(spent)]
    if expires:
        sendable.append(d.c.created_at > bindparam("born_after", type_=UTCDateTime))
    order = (d.c.id,) if by_id else (d.c.next_attempt_at, d.c.id)
    picked = (
        select(d.c.id)
        .where(*due, enabled, *sendable)
        .order_by(*order)
        .limit(bindparam("limit"))
        .with_for_update(skip_locked=True)
        .cte("picked")
        .prefix_with("MATERIALIZED", dialect="postgresql")
    )
    chosen: ColumnElement[bool]
    if postgres:
        # By primary key, whatever the planner guesses of the CTE's size: `IN (SELECT …)`
        # let it hash-join against a scan of the whole table (~20 ms at 30,000 rows).
        chosen = d.c.id == any_(func.array(select(picked.c.id).scalar_subquery()))
    else:
        chosen = d.c.id.in_(select(picked.c.id))
    values: dict[str, Any] = {
        "state": State.SENDING.value,
        "attempts": d.c.attempts + 1,
        "next_attempt_at": bindparam("lease_end", type_=UTCDateTime),
        "lease_token": bindparam("token"),
        "lease_owner": bindparam("owner"),
    }
    if postgres and by_id:
        # D3 in the same statement (a second UPDATE of the batch cost as much as the lease):
        # the batch id is the smallest id taken, set only where still null.
        first = select(func.min(picked.c.id)).scalar_subquery()
        values["batch_id"] = func.coalesce(d.c.batch_id, first)
    return update(d).where(chosen).values(values).returning(*d.c)


def _assign_batch(conn: Connection, claim: Claim) -> Claim:
    """D3: the batch id is the smallest delivery id, kept across retries (SQLite; on
    PostgreSQL the lease sets it)."""
    batch_id = min(claim.ids)
    conn.execute(
        update(d)
        .where(ids_in(conn, d.c.id, claim.ids), d.c.batch_id.is_(None))
        .values(batch_id=batch_id)
    )
    items = [
        replace(item, delivery=replace(item.delivery, batch_id=item.delivery.batch_id or batch_id))
        for item in claim.items
    ]
    return replace(claim, items=items)


@functools.cache
def _sweep_statement(database_clock: bool, expires: bool) -> Any:
    """The sweep, built once per shape (a dispatcher sweeps each channel every few seconds)."""
    now = prepared_now(database_clock)
    born_by: ColumnElement[Any] = (
        type_coerce(func.now() - bindparam("max_age", type_=Interval), UTCDateTime)
        if database_clock
        else bindparam("born_by", type_=UTCDateTime)
    )
    due = and_(d.c.channel_id == bindparam("channel"), is_live(), d.c.next_attempt_at <= now)
    lost = d.c.state == State.SENDING.value
    spent = and_(lost, d.c.attempts >= bindparam("max_attempts"))
    lost_text = func.coalesce(d.c.lease_owner, "a worker") + (
        " did not report before its lease ended (crashed or stalled?)"
    )
    state: list[tuple[ColumnElement[bool], str]] = [(spent, State.FAILED.value)]
    failure: list[tuple[ColumnElement[bool], str]] = [(spent, Failure.EXHAUSTED.value)]
    error: list[tuple[ColumnElement[bool], Any]] = []
    candidates: ColumnElement[bool] = lost
    if expires:
        expired = d.c.created_at <= born_by
        candidates = or_(lost, expired)
        state.insert(0, (expired, State.FAILED.value))
        failure.insert(0, (expired, Failure.EXPIRED.value))
        error.append((expired, bindparam("expired_error", type_=Text)))
    targets = select(d.c.id).where(due, candidates).with_for_update(skip_locked=True)
    values = {
        "state": case(*state, else_=State.PENDING.value),
        "failure": case(*failure, else_=None),
        "last_error": case(*error, else_=lost_text) if error else lost_text,
    }
    return (
        update(d)
        .where(d.c.id.in_(targets.scalar_subquery()))
        .values(values)
        .returning(d.c.id, d.c.failure, d.c.last_error, d.c.batch_id)
    )


def sweep(conn: Connection, clock: TxClock, channel: Channel) -> int:
    """End the due rows that must not be sent again, and audit lost leases.

    O5: a row older than the channel's `max_age_s` fails as expired rather than going out late.
    C2: a row whose lease ran out was lost by its worker; its attempt was counted at claim time,
    so once `max_attempts` are spent it fails as exhausted instead of being leased again.
    Rows merely returning from a lost lease stay claimable and are leased right after.
    """
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
    stmt = _sweep_statement(database_clock, expires)
    swept = conn.execute(stmt, params).mappings().all()
    if not swept:
        return 0
    now = clock.now()
    records = [
        AttemptRecord(
            delivery_id=r["id"],
            worker_id=SWEEPER_ID,
            status=AttemptStatus.EXPIRED
            if r["failure"] == Failure.EXPIRED.value
            else AttemptStatus.RETRYABLE,
            started_at=now,
            finished_at=now,
            error=r["last_error"],
            batch_id=r["batch_id"],
        )
        for r in swept
    ]
    insert_attempts(conn, records)
    return len(records)
