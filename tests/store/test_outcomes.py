"""O1–O7: what each outcome does to a leased row, and the audit rows it leaves."""

from __future__ import annotations

from datetime import UTC, datetime

import tidings
from tests.conftest import count
from tests.store.helpers import LEASE_S, at, attempt, channel, claim, publish, states
from tidings.core import retry
from tidings.core.states import AttemptStatus, Failure, State


async def test_o1_delivered_marks_sent_and_clears_the_error(hub: tidings.Hub) -> None:
    ch = await channel(hub)
    await publish(hub, 1)
    first = await claim(hub, ch)
    await hub.store.schedule_retry(first.token, first.ids, 0.0, "HTTP 500")
    second = await claim(hub, ch, now=at(1))
    assert await hub.store.mark_sent(second.token, second.ids) == 1
    (row,) = (await states(hub)).values()
    assert row.state is State.SENT
    assert row.sent_at is not None
    assert row.last_error is None
    assert row.attempts == 2


async def test_o2_retryable_goes_back_to_pending_after_the_delay(hub: tidings.Hub) -> None:
    ch = await channel(hub, max_attempts=3)
    await publish(hub, 1)
    got = await claim(hub, ch)
    before = datetime.now(UTC)
    assert await hub.store.schedule_retry(got.token, got.ids, 90.0, "HTTP 503: busy") == 1
    (row,) = (await states(hub)).values()
    assert row.state is State.PENDING
    assert row.last_error == "HTTP 503: busy"
    assert 85 < (row.next_attempt_at - before).total_seconds() < 95
    assert await hub.store.claim_realtime(ch.id, 10, LEASE_S, "w", now=at(60)) is None
    assert await hub.store.claim_realtime(ch.id, 10, LEASE_S, "w", now=at(100)) is not None


async def test_o2_retry_after_the_last_attempt_fails_as_exhausted(hub: tidings.Hub) -> None:
    """The core decides whether an attempt is left; the store's `exhaust` transition ends it."""
    ch = await channel(hub, max_attempts=2)
    await publish(hub, 1)
    for i in range(2):
        got = await claim(hub, ch, now=at(10 * i))
        error = f"HTTP 500 #{i}"
        if retry.exhausted(got.items[0].delivery.attempts, ch.max_attempts):
            assert await hub.store.exhaust(got.token, got.ids, error, now=at(10 * i)) == 1
        else:
            await hub.store.schedule_retry(got.token, got.ids, 1.0, error, now=at(10 * i))
    (row,) = (await states(hub)).values()
    assert row.state is State.FAILED
    assert row.failure is Failure.EXHAUSTED
    assert row.attempts == 2
    assert row.last_error == "HTTP 500 #1"


async def test_o3_permanent_failure_fails_at_once(hub: tidings.Hub) -> None:
    ch = await channel(hub, max_attempts=5)
    await publish(hub, 1)
    got = await claim(hub, ch)
    assert await hub.store.fail(got.token, got.ids, "HTTP 404: gone") == 1
    (row,) = (await states(hub)).values()
    assert (row.state, row.failure, row.attempts) == (State.FAILED, Failure.PERMANENT, 1)
    assert row.last_error == "HTTP 404: gone"


async def test_o4_provider_rate_limit_revokes_the_attempt_and_pauses_the_channel(
    hub: tidings.Hub,
) -> None:
    ch = await channel(hub)  # unlimited: only the provider's limit holds it back
    await publish(hub, 3)
    got = await claim(hub, ch, limit=1)
    changed = await hub.store.rate_limited(
        got.token, ch.id, got.ids, 30.0, "45009 api freq out of limit"
    )
    assert changed == 1
    rows = await states(hub)
    limited = rows[got.ids[0]]
    assert limited.state is State.PENDING
    assert limited.attempts == 0
    assert limited.last_error == "45009 api freq out of limit"
    # the other rows of the channel wait out the hint too
    assert await hub.store.claim_realtime(ch.id, 10, LEASE_S, "w", now=at(20)) is None
    resumed = await hub.store.claim_realtime(ch.id, 10, LEASE_S, "w", now=at(35))
    assert resumed is not None
    assert len(resumed) == 3


async def test_o4_rate_limit_never_drives_attempts_below_zero(hub: tidings.Hub) -> None:
    ch = await channel(hub)
    await publish(hub, 1)
    got = await claim(hub, ch)
    await hub.store.rate_limited(got.token, ch.id, got.ids, 0.0, "429")
    again = await claim(hub, ch, now=at(1))
    await hub.store.rate_limited(again.token, ch.id, again.ids, 0.0, "429")
    (row,) = (await states(hub)).values()
    assert row.attempts == 0


async def test_o5_rows_past_the_deadline_fail_as_expired(hub: tidings.Hub) -> None:
    ch = await channel(hub, max_age_s=60)
    await publish(hub, 2)
    got = await claim(hub, ch, limit=1)
    await hub.store.schedule_retry(got.token, got.ids, 1.0, "HTTP 500")
    assert await hub.store.claim_realtime(ch.id, 10, LEASE_S, "w", now=at(61)) is None
    rows = list((await states(hub)).values())
    assert [(r.state, r.failure) for r in rows] == [(State.FAILED, Failure.EXPIRED)] * 2
    assert all("max_age_s" in (r.last_error or "") for r in rows)
    detail = await hub.delivery(rows[0].id)
    assert detail.attempts_log[-1].status is AttemptStatus.EXPIRED


async def test_o5_rows_within_the_deadline_are_sent(hub: tidings.Hub) -> None:
    ch = await channel(hub, max_age_s=60)
    await publish(hub, 1)
    assert await hub.store.claim_realtime(ch.id, 10, LEASE_S, "w", now=at(30)) is not None


async def test_o6_last_error_is_cut_on_a_character_boundary(hub: tidings.Hub) -> None:
    ch = await channel(hub)
    await publish(hub, 1)
    got = await claim(hub, ch)
    error = "错" * 400  # 1,200 bytes of 3-byte characters
    await hub.store.schedule_retry(got.token, got.ids, 1.0, error)
    (row,) = (await states(hub)).values()
    stored = row.last_error or ""
    assert len(stored.encode()) <= 500
    assert stored.endswith("…")
    assert error.startswith(stored[:-1])
    assert len(stored) > 150


async def test_o6_provider_response_in_attempt_rows_is_cut_to_2000_bytes(
    hub: tidings.Hub,
) -> None:
    ch = await channel(hub)
    await publish(hub, 1)
    got = await claim(hub, ch)
    body = "é" * 5000 + "\x00tail"
    record = attempt(got.ids[0], AttemptStatus.RETRYABLE, error="x" * 900, provider_response=body)
    await hub.store.schedule_retry(got.token, got.ids, 1.0, "HTTP 500", [record])
    (stored,) = (await hub.delivery(got.ids[0])).attempts_log
    assert stored.provider_response is not None
    assert len(stored.provider_response.encode()) <= 2000
    assert stored.provider_response.endswith("…")
    assert len((stored.error or "").encode()) <= 500


async def test_o7_every_attempt_writes_an_audit_row(hub: tidings.Hub) -> None:
    ch = await channel(hub)
    await publish(hub, 1)
    first = await claim(hub, ch, owner="w-a")
    await hub.store.schedule_retry(
        first.token,
        first.ids,
        0.0,
        "HTTP 500",
        [
            attempt(
                first.ids[0],
                AttemptStatus.RETRYABLE,
                worker_id="w-a",
                error="HTTP 500",
                provider_response="oops",
                ms=250,
            )
        ],
    )
    second = await claim(hub, ch, owner="w-b", now=at(1))
    await hub.store.mark_sent(
        second.token,
        second.ids,
        [attempt(second.ids[0], AttemptStatus.DELIVERED, worker_id="w-b", provider_response="ok")],
    )
    log = (await hub.delivery(first.ids[0])).attempts_log
    assert [(a.worker_id, a.status) for a in log] == [
        ("w-a", AttemptStatus.RETRYABLE),
        ("w-b", AttemptStatus.DELIVERED),
    ]
    assert log[0].duration_ms == 250
    assert log[0].error == "HTTP 500"
    assert log[0].provider_response == "oops"
    assert all(a.finished_at >= a.started_at for a in log)
    assert await count(hub, "attempts") == 2


async def test_o7_attempt_rows_are_kept_even_when_the_write_is_fenced(hub: tidings.Hub) -> None:
    """A stale worker did send; the audit keeps that, while its state write is refused."""
    ch = await channel(hub)
    await publish(hub, 1)
    stale = await claim(hub, ch, lease_s=1.0, owner="slow")
    await claim(hub, ch, owner="fast", now=at(5))
    record = attempt(stale.ids[0], AttemptStatus.DELIVERED, worker_id="slow")
    assert await hub.store.mark_sent(stale.token, stale.ids, [record]) == 0
    log = (await hub.delivery(stale.ids[0])).attempts_log
    assert ("slow", AttemptStatus.DELIVERED) in [(a.worker_id, a.status) for a in log]


async def test_o7_an_outcome_written_again_audits_its_send_once(hub: tidings.Hub) -> None:
    """A write whose commit's answer was lost with the connection is written again; when the
    first had committed, the second changes nothing and adds no second attempt row."""
    ch = await channel(hub)
    await publish(hub, 9)
    got = await claim(hub, ch)
    sent, failed = got.ids[:8], got.ids[8:]
    records = [attempt(i, AttemptStatus.DELIVERED) for i in sent]
    failure = [attempt(failed[0], AttemptStatus.PERMANENT, error="gone")]
    for _ in range(2):
        await hub.store.mark_sent(got.token, sent, records)
        await hub.store.fail(got.token, failed, "gone", failure)
    for delivery_id in got.ids:
        log = (await hub.delivery(delivery_id)).attempts_log
        assert len(log) == 1, [a.status for a in log]
    assert await count(hub, "attempts") == 9


async def test_o1_o7_a_claims_attempt_rows_are_written_whole_and_in_delivery_order(
    hub: tidings.Hub,
) -> None:
    # Enough rows for PostgreSQL's one-statement write; every field must come back as given.
    ch = await channel(hub)
    await publish(hub, 40)
    got = await claim(hub, ch)
    records = [
        attempt(
            i,
            AttemptStatus.DELIVERED,
            provider_response=f'ok {i} — "quoted" \\ é' + "x" * (i % 3),
            batch_id=None if i % 2 else 7,
            ms=i,
        )
        for i in got.ids
    ]
    assert await hub.store.mark_sent(got.token, got.ids, list(reversed(records))) == 40
    async with hub.store.engine.connect() as conn:
        found = (
            await conn.exec_driver_sql(
                "SELECT delivery_id, provider_response, batch_id, duration_ms, worker_id, status"
                " FROM attempts ORDER BY id"
            )
        ).all()
    given = {r.delivery_id: r for r in records}
    assert [row[0] for row in found] == [r.delivery_id for r in reversed(records)]
    for delivery_id, response, batch_id, duration_ms, worker, status in found:
        record = given[delivery_id]
        assert response == record.provider_response
        assert batch_id == record.batch_id
        assert duration_ms == record.duration_ms
        assert (worker, status) == (record.worker_id, "delivered")
    for delivery_id in got.ids[::7]:  # times come back to the microsecond, in UTC
        (logged,) = (await hub.delivery(delivery_id)).attempts_log
        assert logged.started_at == given[delivery_id].started_at
        assert logged.finished_at == given[delivery_id].finished_at
        assert logged.started_at.tzinfo is UTC
    assert {d.state for d in (await states(hub)).values()} == {State.SENT}
