"""C1–C7: leases, crash healing, fencing, the database clock, the shared rate bucket."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import Connection

import tidings
from tests.store.helpers import LEASE_S, at, attempt, channel, claim, publish, states
from tidings.core.states import AttemptStatus, Failure, SkipReason, State
from tidings.store import claims
from tidings.store.clock import TxClock, utc_now


async def test_c1_claim_leases_due_rows_and_counts_the_attempt(hub: tidings.Hub) -> None:
    ch = await channel(hub)
    await publish(hub, 3)
    before = datetime.now(UTC)
    got = await claim(hub, ch, limit=2, owner="w-1")
    assert len(got) == 2
    assert got.owner == "w-1"
    rows = await states(hub)
    for delivery_id in got.ids:
        row = rows[delivery_id]
        assert row.state is State.SENDING
        assert row.attempts == 1
        assert row.lease_token == got.token
        assert row.lease_owner == "w-1"
        lease = (row.next_attempt_at - before).total_seconds()
        assert LEASE_S - 5 < lease < LEASE_S + 5
    (left,) = [r for r in rows.values() if r.id not in got.ids]
    assert left.state is State.PENDING
    assert left.attempts == 0


async def test_c1_claim_skips_rows_not_yet_due_and_live_leases(hub: tidings.Hub) -> None:
    ch = await channel(hub)
    await publish(hub, 2)
    first = await claim(hub, ch)
    assert len(first) == 2
    assert await hub.store.claim_realtime(ch.id, 10, LEASE_S, "other") is None
    await hub.store.schedule_retry(first.token, first.ids[:1], 30.0, "later")
    assert await hub.store.claim_realtime(ch.id, 10, LEASE_S, "other") is None


async def test_c1_claim_holds_no_lock_after_it_returns(hub: tidings.Hub, db_url: str) -> None:
    """Another connection can update the leased rows while the 'send' is in progress."""
    ch = await channel(hub)
    await publish(hub, 1)
    got = await claim(hub, ch)
    async with tidings.Hub(db_url) as other, other.store.engine.begin() as conn:
        if other.store.backend == "postgresql":  # a held row lock would fail fast, not hang
            await conn.execute(text("SET LOCAL lock_timeout = '2s'"))
        result = await conn.execute(
            text("UPDATE deliveries SET last_error = 'touched' WHERE id = :id"), {"id": got.ids[0]}
        )
        assert result.rowcount == 1


@pytest.mark.parametrize("swept", [True, False])
async def test_c2_expired_lease_is_claimable_again_and_audited_not_counted(
    hub: tidings.Hub, swept: bool
) -> None:
    """A lease that ends without an outcome gets its audit row naming the worker that held
    it, whether the sweep or the next claim finds it; it is not counted as an attempt."""
    ch = await channel(hub)
    await publish(hub, 1)
    first = await claim(hub, ch, lease_s=1.0, owner="crashed")
    second = await claim(hub, ch, owner="rescuer", now=at(5), swept=swept)
    assert second.ids == first.ids
    (row,) = (await states(hub)).values()
    assert (row.attempts, row.lost_leases) == (1, 1)
    assert row.lease_owner == "rescuer"
    detail = await hub.delivery(row.id)
    (lost,) = detail.attempts_log
    assert lost.status is AttemptStatus.LEASE_LOST
    assert lost.worker_id == "crashed"


async def test_c2_a_row_that_keeps_killing_workers_ends_exhausted(hub: tidings.Hub) -> None:
    """Lost leases do not spend attempts, but more than max_attempts of them end the row:
    a message that crashes every worker that takes it is not retried forever."""
    ch = await channel(hub, max_attempts=3)
    await publish(hub, 1)
    for i in range(4):
        await claim(hub, ch, lease_s=1.0, owner=f"crash-{i}", now=at(10 * i))
    again = await hub.store.claim_realtime(ch.id, 10, LEASE_S, "w", now=at(100))
    assert again is None
    (row,) = (await states(hub)).values()
    assert row.state is State.FAILED
    assert row.failure is Failure.EXHAUSTED
    assert (row.attempts, row.lost_leases) == (0, 4)
    assert "crash-3" in (row.last_error or "")
    log = (await hub.delivery(row.id)).attempts_log
    assert [a.worker_id for a in log] == [f"crash-{i}" for i in range(4)]
    assert {a.status for a in log} == {AttemptStatus.LEASE_LOST}


async def test_c2_o5_a_claim_without_sweep_never_leases_what_the_sweep_would_end(
    hub: tidings.Hub,
) -> None:
    """A draining job skips the sweep on most claims; spent lost leases (C2) and expired rows
    (O5) then wait for the next sweep instead of going out."""
    crashy = await channel(hub, "crashy", max_attempts=1, filter={"kinds": ["crash.*"]})
    ageing = await channel(hub, "ageing", max_age_s=60, filter={"kinds": ["age.*"]})
    await publish(hub, 1, kind="crash.loop")
    await claim(hub, crashy, lease_s=1.0, owner="crashed")
    # Taken over once (max_attempts lost leases): the next loss ends it, for the sweep to do.
    spent = await claim(hub, crashy, lease_s=1.0, owner="crashed again", now=at(5))
    await publish(hub, 1, kind="age.old")  # older than max_age_s at the claims below
    for ch in (crashy, ageing):
        got = await hub.store.claim_realtime(ch.id, 10, LEASE_S, "w", swept=False, now=at(120))
        assert got is None
    before = await states(hub)
    assert before[spent.ids[0]].state is State.SENDING
    assert [r.state for r in before.values() if r.channel_id == ageing.id] == [State.PENDING]
    for ch in (crashy, ageing):
        assert await hub.store.claim_realtime(ch.id, 10, LEASE_S, "w", now=at(120)) is None
    after = await states(hub)
    assert after[spent.ids[0]].failure is Failure.EXHAUSTED
    assert [r.failure for r in after.values() if r.channel_id == ageing.id] == [Failure.EXPIRED]


async def test_c3_stale_token_changes_nothing_and_the_new_holder_wins(hub: tidings.Hub) -> None:
    ch = await channel(hub)
    await publish(hub, 1)
    stale = await claim(hub, ch, lease_s=1.0, owner="slow")
    fresh = await claim(hub, ch, owner="fast", now=at(5))
    assert stale.token != fresh.token

    assert await hub.store.mark_sent(fresh.token, fresh.ids) == 1
    assert await hub.store.schedule_retry(stale.token, stale.ids, 1.0, "late report") == 0
    assert await hub.store.fail(stale.token, stale.ids, "late") == 0
    assert await hub.store.mark_sent(stale.token, stale.ids) == 0

    (row,) = (await states(hub)).values()
    assert row.state is State.SENT
    assert row.last_error is None
    assert row.lease_owner == "fast"


async def test_c3_stale_token_cannot_undo_a_newer_lease_in_flight(hub: tidings.Hub) -> None:
    ch = await channel(hub)
    await publish(hub, 1)
    stale = await claim(hub, ch, lease_s=1.0, owner="slow")
    fresh = await claim(hub, ch, owner="fast", now=at(5))
    assert await hub.store.defer(stale.token, stale.ids) == 0
    (row,) = (await states(hub)).values()
    assert row.state is State.SENDING
    assert row.lease_token == fresh.token
    assert (row.attempts, row.lost_leases) == (1, 1)


async def test_c4_lease_and_due_times_follow_the_database_clock(db_url: str, backend: str) -> None:
    """An application clock an hour fast: PostgreSQL ignores it (the database clock decides),
    SQLite has no other clock and uses it consistently for creation, due times and leases."""
    skew = timedelta(hours=1)
    async with tidings.Hub(db_url, clock=lambda: datetime.now(UTC) + skew) as fast:
        ch = await fast.channels.create(name="ops", kind="inbox")
        published = await fast.publish(kind="a.b", subject="s")
        got = await fast.store.claim_realtime(ch.id, 10, LEASE_S, "w")
        assert got is not None
        created = published.event.created_at
        lease_end = got.lease_expires_at
        assert lease_end is not None
        offset = skew if backend == "sqlite" else timedelta(0)
        real_now = datetime.now(UTC)
        assert abs(created - (real_now + offset)) < timedelta(seconds=10)
        assert abs(lease_end - (real_now + offset + timedelta(seconds=LEASE_S))) < timedelta(
            seconds=10
        )


async def test_c6_claims_never_exceed_the_shared_bucket(hub: tidings.Hub, db_url: str) -> None:
    ch = await channel(hub, rate_per_min=60, rate_burst=5)
    await publish(hub, 20)
    async with tidings.Hub(db_url) as other:
        first = await claim(hub, ch, limit=100)
        assert len(first) == 5
        assert await other.store.claim_realtime(ch.id, 100, LEASE_S, "w2") is None
        # one token per second at 60/min: three seconds later, three more rows
        later = await other.store.claim_realtime(ch.id, 100, LEASE_S, "w2", now=at(3.05))
        assert later is not None
        assert len(later) == 3
    waiting = [r for r in (await states(hub)).values() if r.state is State.PENDING]
    assert len(waiting) == 12
    assert all(r.attempts == 0 for r in waiting)


async def test_c6_bucket_never_holds_more_than_burst(hub: tidings.Hub) -> None:
    ch = await channel(hub, rate_per_min=60, rate_burst=2)
    await publish(hub, 10)
    got = await claim(hub, ch, limit=100, now=at(3600))
    assert len(got) == 2


async def test_c7_disable_skips_pending_and_claims_require_enabled(hub: tidings.Hub) -> None:
    ch = await channel(hub)
    await publish(hub, 3)
    in_flight = await claim(hub, ch, limit=1)
    skipped = await hub.channels.disable(ch.id, "maintenance")
    assert skipped == 2
    assert await hub.store.claim_realtime(ch.id, 10, LEASE_S, "w") is None
    rows = await states(hub)
    assert rows[in_flight.ids[0]].state is State.SENDING
    others = [r for r in rows.values() if r.id not in in_flight.ids]
    assert all(r.state is State.SKIPPED for r in others)
    assert all(r.skip_reason is SkipReason.CHANNEL_DISABLED for r in others)
    # the in-flight row would go back to pending: it is skipped instead of waiting forever
    await hub.store.schedule_retry(in_flight.token, in_flight.ids, 1.0, "boom")
    assert (await states(hub))[in_flight.ids[0]].state is State.SKIPPED
    # re-enabling does not revive skipped rows
    await hub.channels.enable(ch.id)
    assert await hub.store.claim_realtime(ch.id, 10, LEASE_S, "w") is None
    assert (await hub.channels.get(ch.id)).disabled_reason is None


async def test_c7_new_publishes_to_a_disabled_channel_are_skipped(hub: tidings.Hub) -> None:
    ch = await channel(hub)
    await hub.channels.disable(ch.id)
    (result,) = await publish(hub, 1)
    assert [d.state for d in result.deliveries] == [State.SKIPPED]


@pytest.mark.parametrize("limit", [0, -1])
async def test_c1_nothing_claimed_for_a_non_positive_limit(hub: tidings.Hub, limit: int) -> None:
    ch = await channel(hub)
    await publish(hub, 1)
    assert await hub.store.claim_realtime(ch.id, limit, LEASE_S, "w") is None


async def test_c1_attempt_rows_are_kept_with_the_outcome(hub: tidings.Hub) -> None:
    ch = await channel(hub)
    await publish(hub, 1)
    got = await claim(hub, ch)
    record = attempt(got.ids[0], AttemptStatus.DELIVERED, provider_response="ok")
    assert await hub.store.mark_sent(got.token, got.ids, [record]) == 1
    detail = await hub.delivery(got.ids[0])
    assert [a.status for a in detail.attempts_log] == [AttemptStatus.DELIVERED]


async def test_only_a_realtime_claim_commits_without_waiting_for_the_wal_flush(
    pg_url: str,
) -> None:
    """PostgreSQL only (SQLite has no such setting): a claim lost in a crash is re-sent like
    a lost lease, so it need not wait for the flush; every other transaction still does."""

    def claim_then_show(conn: Connection, channel_id: int) -> str:
        clock = TxClock(conn, None, utc_now)
        found = claims.claim_realtime(conn, clock, channel_id, 10, 60, "w")
        assert found is not None
        return str(conn.exec_driver_sql("SHOW synchronous_commit").scalar())

    def show(conn: Connection) -> str:
        return str(conn.exec_driver_sql("SHOW synchronous_commit").scalar())

    async with tidings.Hub(pg_url) as hub:
        ch = await channel(hub)
        await publish(hub)
        async with hub.store.engine.connect() as conn:
            async with conn.begin():
                assert await conn.run_sync(claim_then_show, ch.id) == "off"
            async with conn.begin():
                assert await conn.run_sync(show) == "on"


async def test_e3_an_event_claimed_for_another_channel_is_not_read_again(
    hub: tidings.Hub, db_url: str
) -> None:
    a = await channel(hub, "a")
    b = await channel(hub, "b")
    (published,) = await publish(hub, 1, title="once", data={"n": 2**70}, labels={"k": "v"})
    reads: list[str] = []

    def watch(_conn: Any, _cursor: Any, sql: str, *_rest: Any) -> None:
        if "FROM events" in sql:
            reads.append(sql)

    engine = hub.store.sync_engine
    event.listen(engine, "before_cursor_execute", watch)
    try:
        first = await claim(hub, a)
        assert len(reads) == 1  # read once, for the first channel
        known = {item.event.id: item.event for item in first.items}
        second = await claim(hub, b, known_events=known)
        assert len(reads) == 1  # the second channel's claim reused the caller's copy
    finally:
        event.remove(engine, "before_cursor_execute", watch)
    assert second.items[0].event is first.items[0].event
    assert first.items[0].event == published.event
    # A caller that knows nothing (another dispatcher) reads it, and gets the same event.
    async with tidings.Hub(db_url) as other:
        await other.channels.get(a.id)
        await hub.store.mark_sent(first.token, first.ids)
        await other.store.defer(second.token, second.ids)
        again = await other.store.claim_realtime(b.id, 10, LEASE_S, "other")
        assert again is not None
        assert again.items[0].event == published.event
