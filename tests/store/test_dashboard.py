"""The dashboard's reads on both backends: attempts per hour (exact at hour boundaries) and
deliveries per state (exact up to the bound, estimated beyond, never negative)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import insert, update

import tidings
from tests.store.helpers import channel, publish
from tidings.store import dashboard
from tidings.store.schema import attempts, deliveries

NOW = datetime(2026, 6, 1, 12, 30, tzinfo=UTC)


async def _attempts(hub: tidings.Hub, finished: list[tuple[datetime, str]]) -> None:
    await channel(hub)
    (published,) = await publish(hub)
    rows = [
        {
            "delivery_id": published.deliveries[0].id,
            "worker_id": f"w{i}",  # one attempt per worker and moment
            "status": status,
            "duration_ms": 1,
            "started_at": at,
            "finished_at": at,
        }
        for i, (at, status) in enumerate(finished)
    ]
    async with hub.store.engine.begin() as conn:
        await conn.execute(insert(attempts), rows)


async def test_hourly_attempts_counts_each_attempt_in_its_own_hour(hub: tidings.Hub) -> None:
    hour = NOW.replace(minute=0)
    await _attempts(
        hub,
        [
            (hour, "delivered"),  # the first instant of the current hour
            (hour - timedelta(microseconds=1), "delivered"),  # the last of the hour before
            (hour - timedelta(minutes=30), "retryable"),
            (hour - timedelta(hours=23), "permanent"),  # the oldest hour shown
            (hour - timedelta(hours=23, microseconds=1), "delivered"),  # before it: not shown
            (NOW + timedelta(hours=2), "delivered"),  # after the last hour: not shown
            (hour, "deferred"),  # neither delivered nor failed
        ],
    )
    buckets = await hub.store.hourly_attempts(24, now=NOW)
    assert len(buckets) == 24
    assert buckets[0].start == hour - timedelta(hours=23)
    assert buckets[-1].start == hour
    assert [(b.sent, b.failed) for b in buckets if b.sent or b.failed] == [(0, 1), (1, 1), (1, 0)]
    assert (buckets[0].sent, buckets[0].failed) == (0, 1)
    assert (buckets[-2].sent, buckets[-2].failed) == (1, 1)


async def test_state_counts_are_exact_up_to_the_bound_and_estimates_beyond(
    hub: tidings.Hub,
) -> None:
    await channel(hub)
    await publish(hub, 12)
    async with hub.store.engine.begin() as conn:
        await conn.execute(update(deliveries).where(deliveries.c.id <= 8).values(state="sent"))
        await conn.execute(update(deliveries).where(deliveries.c.id == 9).values(state="failed"))
    exact = await hub.store.state_counts()
    assert exact == {"pending": 3, "sending": 0, "sent": 8, "failed": 1, "skipped": 0}
    hub.store.exact_total_up_to = 4
    estimated = await hub.store.state_counts()
    assert (estimated["pending"], estimated["failed"], estimated["skipped"]) == (3, 1, 0)
    assert estimated["sent"] >= 1  # all rows (more than 4: an estimate) less the others


async def _sent_at(hub: tidings.Hub, times: list[datetime], name: str = "ops") -> int:
    """A channel whose deliveries, oldest first, were sent at `times`; its id."""
    ch = await channel(hub, name)
    published = await publish(hub, len(times))
    async with hub.store.engine.begin() as conn:
        for result, at in zip(published, times, strict=True):
            (delivery,) = [d for d in result.deliveries if d.channel_id == ch.id]
            await conn.execute(
                update(deliveries)
                .where(deliveries.c.id == delivery.id)
                .values(state="sent", sent_at=at)
            )
    return ch.id


async def test_a_channels_last_success_is_its_latest_send_not_its_newest_row(
    hub: tidings.Hub,
) -> None:
    """An older delivery sent after a newer one (its retry succeeded later) is the last
    success; a channel that never sent has none."""
    ops = await _sent_at(hub, [NOW, NOW - timedelta(hours=2), NOW - timedelta(hours=1)])
    idle = (await channel(hub, "idle")).id
    health = await hub.store.channel_health([ops, idle], now=NOW)
    assert health[ops].last_success_at == NOW
    assert health[idle].last_success_at is None


async def test_a_channels_last_success_is_read_among_its_newest_sends(
    hub: tidings.Hub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bounded however many it ever sent: a send older than the newest LAST_SUCCESS_AMONG
    sent rows is not looked at."""
    monkeypatch.setattr(dashboard, "LAST_SUCCESS_AMONG", 2)
    times = [NOW, NOW - timedelta(hours=3), NOW - timedelta(hours=2)]
    ops = await _sent_at(hub, times)
    health = await hub.store.channel_health([ops], now=NOW)
    assert health[ops].last_success_at == NOW - timedelta(hours=2)
