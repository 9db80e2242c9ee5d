"""R1 on both backends: what has outlived its retention goes in small batches — ended
deliveries with their attempts and resends, events without a delivery — and nothing live."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update

import tidings
from tests.conftest import count
from tests.store.helpers import attempt, channel, claim, publish, states
from tidings.core.states import AttemptStatus, State
from tidings.store.schema import deliveries, events

DAYS = 30


async def _age(hub: tidings.Hub, days: float, ids: list[int] | None = None) -> None:
    """Backdate events and deliveries (all, or these deliveries) by `days`."""
    then = datetime.now(UTC) - timedelta(days=days)
    async with hub.store.engine.begin() as conn:
        stmt = update(deliveries).values(created_at=then)
        if ids is not None:
            stmt = stmt.where(deliveries.c.id.in_(ids))
        await conn.execute(stmt)
        await conn.execute(update(events).values(created_at=then))


async def _ended(hub: tidings.Hub, ch: tidings.Channel, n: int) -> list[int]:
    got = await claim(hub, ch, limit=n)
    rows = [attempt(i, AttemptStatus.DELIVERED) for i in got.ids]
    await hub.store.mark_sent(got.token, got.ids, rows)
    return got.ids


async def test_r1_ended_rows_older_than_retention_go_live_ones_stay(hub: tidings.Hub) -> None:
    ch = await channel(hub)
    await publish(hub, 5)
    await _ended(hub, ch, 2)
    failed = await claim(hub, ch, limit=1)
    await hub.store.fail(
        failed.token, failed.ids, "HTTP 404", [attempt(failed.ids[0], AttemptStatus.PERMANENT)]
    )
    await hub.resend(failed.ids[0])  # pending again: live, stays
    leased = await claim(hub, ch, limit=1)  # sending: live, stays
    await _age(hub, DAYS + 1)
    assert await hub.store.purge_due(DAYS) == {"ops": 2, "(events without a delivery)": 0}
    purged = await hub.store.purge(DAYS)
    assert (purged.deliveries, purged.busy) == (2, False)
    left = await states(hub)
    assert {r.state for r in left.values()} == {State.PENDING, State.SENDING}
    assert leased.ids[0] in left
    assert await count(hub, "attempts") == 1  # the resent row's; the purged rows' went along
    assert await count(hub, "events") == 3  # the purged deliveries' events had no other
    assert (await hub.store.purge(DAYS)).rows == 0


async def test_r1_a_channel_keeps_its_own_retention(hub: tidings.Hub) -> None:
    short = await channel(hub, "short", retention_days=1, filter={"kinds": ["s.*"]})
    long = await channel(hub, "long", retention_days=90, filter={"kinds": ["l.*"]})
    default = await channel(hub, "default", filter={"kinds": ["d.*"]})
    for kind, ch in (("s.x", short), ("l.x", long), ("d.x", default)):
        await publish(hub, 1, kind=kind)
        await _ended(hub, ch, 1)
    await _age(hub, 2)
    assert (await hub.store.purge(DAYS)).deliveries == 1  # the short one only
    await _age(hub, DAYS + 1)
    assert (await hub.store.purge(DAYS)).deliveries == 1  # then the default one
    assert [r.channel_id for r in (await states(hub)).values()] == [long.id]


async def test_r1_batches_are_small_and_archived_first(hub: tidings.Hub) -> None:
    ch = await channel(hub)
    await publish(hub, 5)
    ids = await _ended(hub, ch, 5)
    await _age(hub, DAYS + 1)
    archived: list[tuple[str, dict[str, Any]]] = []
    first = await hub.store.purge(DAYS, lambda name, row: archived.append((name, dict(row))))
    assert first.deliveries == 5
    assert sorted(r["id"] for name, r in archived if name == "delivery") == ids
    assert len([1 for name, _ in archived if name == "attempt"]) == 5
    assert len([1 for name, _ in archived if name == "event"]) == 5


async def test_r1_one_purger_at_a_time(pg_url: str) -> None:
    """PostgreSQL only: a purger that finds another's turn taken does nothing."""
    async with tidings.Hub(pg_url) as hub:
        ch = await channel(hub)
        await publish(hub, 2)
        await _ended(hub, ch, 2)
        await _age(hub, DAYS + 1)
        async with hub.store.engine.connect() as conn, conn.begin():
            dialect = hub.store.dialect
            assert await conn.run_sync(lambda c: dialect.try_exclusive(c, "retention"))
            busy = await hub.store.purge(DAYS)
        assert (busy.busy, busy.rows) == (True, 0)
        assert (await hub.store.purge(DAYS)).deliveries == 2


@pytest.mark.parametrize("days", [DAYS])
async def test_r1_a_retention_of_nothing_due_purges_nothing(hub: tidings.Hub, days: int) -> None:
    ch = await channel(hub)
    await publish(hub, 2)
    await _ended(hub, ch, 2)
    assert (await hub.store.purge(days)).rows == 0


async def test_r1_events_that_never_had_a_delivery_go_by_a_sweep_in_small_steps(
    hub: tidings.Hub,
) -> None:
    """Events no channel matched are found by a sweep over events in id order, `limit` at a
    time from where the last batch stopped, ending at the first event too young to go."""
    ch = await channel(hub, filter={"kinds": ["kept.*"]})
    unmatched = [r.event.id for r in await publish(hub, 5, kind="unmatched.x")]
    await publish(hub, 1, kind="kept.x")
    await _ended(hub, ch, 1)
    await _age(hub, DAYS + 1)
    await publish(hub, 1, kind="unmatched.young")  # too young: the sweep ends here
    first = await hub.store.purge(DAYS, limit=2, events_after=0)
    # The ended delivery and its event (checked by id), and the first two swept.
    assert (first.deliveries, first.events, first.events_after) == (1, 3, unmatched[1])
    second = await hub.store.purge(DAYS, limit=2, events_after=first.events_after)
    assert (second.events, second.events_after) == (2, unmatched[3])
    third = await hub.store.purge(DAYS, limit=2, events_after=second.events_after)
    assert (third.events, third.events_after) == (1, None)  # met the young one: over
    assert await count(hub, "events") == 1
    assert (await hub.store.purge(DAYS, events_after=None)).rows == 0


async def test_r1_a_batch_reads_no_more_events_than_its_limit(hub: tidings.Hub) -> None:
    """Without a sweep, a batch looks only at the events of the deliveries it deletes: old
    events that still have a delivery are not read. A sweep step reads `limit` of them."""
    ch = await channel(hub, retention_days=365)  # these deliveries stay a year
    ids = [r.event.id for r in await publish(hub, 30)]
    await _ended(hub, ch, 30)
    await _age(hub, DAYS + 1)
    assert (await hub.store.purge(DAYS, limit=5, events_after=None)).rows == 0
    swept = await hub.store.purge(DAYS, limit=5, events_after=0)
    assert (swept.rows, swept.events_after) == (0, ids[4])
    assert await count(hub, "events") == 30
