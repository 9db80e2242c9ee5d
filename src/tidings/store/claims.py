"""Claims (C1, C2, C6, D1–D4, O5): one short transaction that sweeps the channel's due rows
that must not be sent (past the deadline, or a lease that ran out after the last attempt),
then leases at most the channel's rate budget.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import select
from sqlalchemy.engine import Connection

from tidings.core import ratelimit
from tidings.core.model import Claim, ClaimedDelivery, Event
from tidings.core.states import Mode
from tidings.store import buckets, health, rows
from tidings.store.channel_ops import load_channel
from tidings.store.clock import TxClock
from tidings.store.dialects import dialect_for
from tidings.store.lease import lease
from tidings.store.schema import deliveries, events
from tidings.store.sweep import sweep
from tidings.store.transitions import guard

#: D2: a digest batch is a hard memory bound, clamped whatever a caller asks for.
MAX_DIGEST_BATCH = 500

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
    started = dialect_for(conn).relaxed_claim_start(conn, channel_id)
    channel, unlocked = started if started is not None else (load_channel(conn, channel_id), None)
    if channel is None or not channel.enabled or channel.mode is not Mode.REALTIME or limit <= 0:
        return None
    if swept:
        sweep(conn, clock, channel)
    bucket: ratelimit.Bucket | None
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
    allowed = _admitted(conn, clock, channel.id, allowed, lease_s)
    if allowed <= 0:
        return None
    claim = lease(conn, clock, channel, allowed, lease_s, owner, by_id=False, known=known)
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
        .where(
            d.c.channel_id == channel.id,
            guard("claim", now=clock.at()),
            d.c.created_at <= clock.at(-channel.digest_period_s),
        )
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
    size = _admitted(conn, clock, channel.id, min(limit, MAX_DIGEST_BATCH), lease_s)
    if size <= 0:
        return None
    claim = lease(conn, clock, channel, size, lease_s, owner, by_id=True, known=known)
    if claim is not None:
        buckets.spend(conn, channel, bucket, now, 1)
    return claim


def _admitted(conn: Connection, clock: TxClock, channel_id: int, asked: int, lease_s: float) -> int:
    """H1: what the channel's breaker lets this claim lease — all it asked, the one probe, or
    nothing while the breaker is open (the rows wait, no attempt spent)."""
    cap = health.admission(conn, clock, channel_id, lease_s)
    return asked if cap is None else min(asked, cap)


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
            select(d).where(guard("mark_sent", token=token)).order_by(d.c.id)
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
