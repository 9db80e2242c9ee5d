"""What happened to leased rows (O1–O5, D5, W3): the transitions a worker's outcome makes,
each fenced by the lease token (C3) and written with its attempt rows (O7).

A transition's guard comes from the state table (`tidings.store.transitions`): a worker whose
lease ran out and whose rows were claimed again changes nothing. Each returns how many rows
changed; the caller counts the difference as fenced (stale) writes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Text,
    Update,
    bindparam,
    case,
    func,
    select,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection

from tidings.core import ratelimit
from tidings.core.model import AttemptRecord
from tidings.core.states import Failure, SkipReason
from tidings.core.text import LAST_ERROR_MAX_BYTES, PROVIDER_RESPONSE_MAX_BYTES, storable
from tidings.store import buckets, postgres
from tidings.store.channel_ops import load_channel
from tidings.store.clock import TxClock, prepared_now
from tidings.store.dialect import Dialect
from tidings.store.dialects import dialect_for
from tidings.store.direct import Direct
from tidings.store.failed import Failed, after_failed
from tidings.store.schema import attempts, channels, deliveries
from tidings.store.transitions import guard, target

d = deliveries
#: Claims whose delivered rows one statement marks sent at most.
MAX_SENT_CLAIMS = 64
#: Statements marking delivered rows one process runs at once: the claims that finish while
#: one runs go together in the next (as `express.GROUPS_IN_FLIGHT`). Nothing waits on them
#: but the claims' own jobs: a message has reached its receiver before its row is marked.
SENT_GROUPS_IN_FLIGHT = 1


def attempt_row(r: AttemptRecord) -> dict[str, Any]:
    """An attempt row's values, its texts cut per O6."""
    return {
        "delivery_id": r.delivery_id,
        "batch_id": r.batch_id,
        "worker_id": r.worker_id,
        "status": r.status.value,
        "error": storable(r.error, LAST_ERROR_MAX_BYTES),
        "duration_ms": r.duration_ms,
        "provider_response": storable(r.provider_response, PROVIDER_RESPONSE_MAX_BYTES),
        "started_at": r.started_at,
        "finished_at": r.finished_at,
    }


def insert_attempts(conn: Connection, records: Sequence[AttemptRecord]) -> None:
    if records:
        dialect_for(conn).insert_attempts(conn, attempts, [attempt_row(r) for r in records])


def mark_sent(
    conn: Connection,
    clock: TxClock,
    token: str,
    ids: Sequence[int],
    records: Sequence[AttemptRecord] = (),
) -> int:
    """O1, for every delivered row of a claim: the outcome of nearly every send."""
    if not ids:
        return 0
    dialect = dialect_for(conn)
    params = {"ids": list(ids), "token": token, **clock.now_param()}
    stmt = _sent_statement(dialect, clock.unread)
    return _write(conn, dialect, stmt, params, records)


@dataclass(frozen=True)
class Sent:
    """One claim's delivered rows and their attempt rows (O1)."""

    token: str
    ids: Sequence[int]
    records: Sequence[AttemptRecord] = ()


def mark_sent_many(conn: Connection, clock: TxClock, claims: Sequence[Sent]) -> list[int]:
    """O1 for the delivered rows of many claims, each fenced by its own token, in one
    statement: rows changed per claim."""
    dialect = dialect_for(conn)
    if not dialect.outcome_in_one_statement:
        return [mark_sent(conn, clock, c.token, c.ids, c.records) for c in claims]
    ids, tokens, records = _gathered(claims)
    if not ids:
        return [0] * len(claims)
    params = {"ids": ids, "tokens": tokens, **clock.now_param()}
    stmt = _sent_many_statement(clock.unread)
    changed = set(dialect.changed_with_attempts(conn, stmt, params, attempts, records))
    return _changed_per_claim(claims, changed)


async def mark_sent_many_direct(direct: Direct, claims: Sequence[Sent]) -> list[int]:
    """`mark_sent_many` on the store's own driver connection to PostgreSQL (the database's
    clock; `tidings.store.direct`)."""
    ids, tokens, records = _gathered(claims)
    if not ids:
        return [0] * len(claims)
    stmt, rows_param = postgres.with_attempts(_sent_many_statement(True), attempts, records)
    found = await direct.fetch(stmt, {"ids": ids, "tokens": tokens, **rows_param})
    return _changed_per_claim(claims, {row[0] for row in found})


async def warm_direct(direct: Direct) -> None:
    """Send `mark_sent_many_direct`'s statement once, for no row: it changes nothing."""
    stmt, rows_param = postgres.with_attempts(_sent_many_statement(True), attempts, [])
    await direct.fetch(stmt, {"ids": [], "tokens": [], **rows_param})


def _gathered(claims: Sequence[Sent]) -> tuple[list[int], list[str], list[dict[str, Any]]]:
    """Every claim's ids, each id's token, and every attempt row."""
    ids: list[int] = []
    tokens: list[str] = []
    records: list[dict[str, Any]] = []
    for claim in claims:
        ids.extend(claim.ids)
        tokens.extend([claim.token] * len(claim.ids))
        records.extend(attempt_row(r) for r in claim.records)
    return ids, tokens, records


def _changed_per_claim(claims: Sequence[Sent], changed: set[int]) -> list[int]:
    return [sum(1 for i in claim.ids if i in changed) for claim in claims]


@functools.cache
def _sent_many_statement(database_clock: bool) -> Update:
    """`UPDATE … FROM unnest(:ids, :tokens)`: each row fenced by its own claim's token."""
    asked = (
        func.unnest(
            bindparam("ids", type_=postgresql.ARRAY(BigInteger)),
            bindparam("tokens", type_=postgresql.ARRAY(Text)),
        )
        .table_valued("id", "token")
        .render_derived()
        .alias("asked")
    )
    return (
        update(d)
        .where(d.c.id == asked.c.id, guard("mark_sent", token=asked.c.token))
        .values(_sent_values(database_clock))
    )


@functools.cache
def _sent_statement(dialect: Dialect, database_clock: bool) -> Update:
    """Built once per shape, its values bound at execution."""
    return (
        update(d)
        .where(dialect.ids_param(d.c.id, "ids"), guard("mark_sent"))
        .values(_sent_values(database_clock))
    )


def _sent_values(database_clock: bool) -> dict[str, Any]:
    return {
        "state": target("mark_sent"),
        "sent_at": prepared_now(database_clock),
        "last_error": None,
        "failure": None,
    }


def schedule_retry(
    conn: Connection,
    clock: TxClock,
    token: str,
    ids: Sequence[int],
    records: Sequence[AttemptRecord],
    delay_s: float,
    error: str,
) -> int:
    """O2: back to pending after `delay_s` (the caller decided an attempt is left)."""
    values = _back_to_pending("schedule_retry") | {
        "next_attempt_at": clock.at(delay_s),
        "last_error": storable(error, LAST_ERROR_MAX_BYTES),
    }
    return _fenced(conn, "schedule_retry", token, ids, values, records)


def exhaust(
    conn: Connection,
    clock: TxClock,
    token: str,
    ids: Sequence[int],
    records: Sequence[AttemptRecord],
    error: str,
) -> int:
    """O2: a retryable failure with `max_attempts` spent ends failed (exhausted)."""
    values = {
        "state": target("exhaust"),
        "failure": Failure.EXHAUSTED.value,
        "last_error": storable(error, LAST_ERROR_MAX_BYTES),
    }
    return _ended_failed(conn, clock, "exhaust", token, ids, values, records)


def fail(
    conn: Connection,
    clock: TxClock,
    token: str,
    ids: Sequence[int],
    records: Sequence[AttemptRecord],
    error: str,
) -> int:
    """O3: retrying cannot help (a permanent answer, or a message that cannot be rendered)."""
    values = {
        "state": target("fail"),
        "failure": Failure.PERMANENT.value,
        "last_error": storable(error, LAST_ERROR_MAX_BYTES),
    }
    return _ended_failed(conn, clock, "fail", token, ids, values, records)


def rate_limited(
    conn: Connection,
    clock: TxClock,
    token: str,
    ids: Sequence[int],
    records: Sequence[AttemptRecord],
    channel_id: int,
    delay_s: float,
    error: str,
) -> int:
    """O4: not the message's fault. Attempt revoked, due after the hint, channel paused."""
    values = _back_to_pending("rate_limited") | {
        "attempts": _revoked_attempt(),
        "next_attempt_at": clock.at(delay_s),
        "last_error": storable(error, LAST_ERROR_MAX_BYTES),
    }
    changed = _fenced(conn, "rate_limited", token, ids, values, records)
    pause_channel(conn, clock, channel_id, delay_s)
    return changed


def defer(
    conn: Connection,
    clock: TxClock,
    token: str,
    ids: Sequence[int],
    records: Sequence[AttemptRecord] = (),
) -> int:
    """D5 / W3: not sent now and not a failure: attempt revoked, claimable at once."""
    values = _back_to_pending("defer") | {
        "attempts": _revoked_attempt(),
        "next_attempt_at": clock.at(),
    }
    return _fenced(conn, "defer", token, ids, values, records)


def pause_channel(conn: Connection, clock: TxClock, channel_id: int, delay_s: float) -> None:
    """Drain the channel's bucket so its other rows wait out the provider's limit too."""
    channel = load_channel(conn, channel_id)
    if channel is None:
        return
    now = clock.now()
    bucket = buckets.lock(conn, channel, clock) or ratelimit.full(now, channel.rate_burst)
    until = now + timedelta(seconds=delay_s)
    buckets.save(conn, channel_id, ratelimit.pause(bucket, now, until))


def _fenced(
    conn: Connection,
    transition: str,
    token: str,
    ids: Sequence[int],
    values: dict[str, Any],
    records: Sequence[AttemptRecord],
) -> int:
    if not ids:
        return 0
    dialect = dialect_for(conn)
    stmt = update(d).where(dialect.ids_param(d.c.id, "ids"), guard(transition)).values(values)
    return _write(conn, dialect, stmt, {"ids": list(ids), "token": token}, records)


def _ended_failed(
    conn: Connection,
    clock: TxClock,
    transition: str,
    token: str,
    ids: Sequence[int],
    values: dict[str, Any],
    records: Sequence[AttemptRecord],
) -> int:
    """A fenced transition to `failed`, its attempt rows, and what follows a failure (F1, H2)
    for the rows it changed."""
    if not ids:
        return 0
    stmt = (
        update(d)
        .where(dialect_for(conn).ids_in(d.c.id, ids), guard(transition, token=token))
        .values(values)
        .returning(d.c.id, d.c.event_id, d.c.channel_id, d.c.failure, d.c.last_error)
    )
    changed = [Failed(*row) for row in conn.execute(stmt).all()]
    insert_attempts(conn, records)
    after_failed(conn, clock, changed)
    return len(changed)


def _write(
    conn: Connection,
    dialect: Dialect,
    stmt: Update,
    params: dict[str, Any],
    records: Sequence[AttemptRecord],
) -> int:
    rows = [attempt_row(r) for r in records]
    return dialect.update_with_attempts(conn, stmt, params, attempts, rows)


def _back_to_pending(transition: str) -> dict[str, Any]:
    """State and skip reason for a row that `transition` returns to pending — or that ends
    `skip_on_return` when its channel was disabled meanwhile (C7), so no row waits forever
    on a channel that claims nothing."""
    enabled = select(channels.c.enabled).where(channels.c.id == d.c.channel_id).scalar_subquery()
    return {
        "state": case((enabled, target(transition)), else_=target("skip_on_return")),
        "skip_reason": case((enabled, None), else_=SkipReason.CHANNEL_DISABLED.value),
    }


def _revoked_attempt() -> ColumnElement[int]:
    return case((d.c.attempts > 0, d.c.attempts - 1), else_=0)
