"""Concurrency on PostgreSQL: claimers never block on or double-claim each other (W1), and
writes that race for the same rows each count (the breaker's health, an outcome written
twice)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Connection

import tidings
from tests.dispatch.helpers import eventually
from tests.store.helpers import LEASE_S, attempt, channel, claim, publish
from tidings.core.breaker import BreakerState, Policy
from tidings.core.states import AttemptStatus
from tidings.store import health, outcomes
from tidings.store.clock import TxClock

ROWS = 10_000
CLAIMERS = 4
LIMIT = 300


@pytest.fixture
async def pg_hub(pg_url: str) -> AsyncIterator[tidings.Hub]:
    async with tidings.Hub(pg_url) as hub:
        yield hub


async def test_four_claimers_over_ten_thousand_rows_claim_disjoint_sets(
    pg_hub: tidings.Hub,
) -> None:
    ch = await pg_hub.channels.create(name="storm", kind="inbox")
    for start in range(0, ROWS, 2000):
        await pg_hub.publish_many(
            [{"kind": "finding.created", "subject": f"f:{i}"} for i in range(start, start + 2000)]
        )
    url = pg_hub.store.url.render_as_string(hide_password=False).replace("+asyncpg", "")
    workers = [tidings.Hub(url) for _ in range(CLAIMERS)]
    sizes: list[int] = []

    async def drain(worker: tidings.Hub, name: str) -> list[int]:
        mine: list[int] = []
        while True:
            got = await worker.store.claim_realtime(ch.id, LIMIT, LEASE_S, name)
            if got is None:
                return mine
            sizes.append(len(got))
            mine.extend(got.ids)

    try:
        claimed = await asyncio.gather(*(drain(w, f"w{i}") for i, w in enumerate(workers)))
    finally:
        await asyncio.gather(*(w.close() for w in workers))

    everything = [i for ids in claimed for i in ids]
    assert len(everything) == ROWS
    assert len(set(everything)) == ROWS  # disjoint: no row claimed twice
    assert max(sizes) <= LIMIT
    assert sum(1 for ids in claimed if ids) >= 2  # the work really was shared
    page = await pg_hub.deliveries(tidings.DeliveryQuery(state=tidings.State.SENDING))
    assert page.total == ROWS


async def test_a_read_runs_without_a_transaction_of_its_own(pg_hub: tidings.Hub) -> None:
    # now() is the transaction's start: inside BEGIN … COMMIT both statements see the same;
    # each statement in a transaction of its own sees a later one.
    def read(conn: Connection, _clock: object) -> bool:
        first = conn.exec_driver_sql("SELECT now()").scalar()
        second = conn.exec_driver_sql("SELECT now() FROM pg_sleep(0.01)").scalar()
        return bool(first != second)

    assert await pg_hub.store._run(read, read_only=True)
    assert not await pg_hub.store._run(read)  # a write keeps its transaction


async def test_h1_failures_recorded_at_once_on_a_healthy_channel_all_count(
    pg_hub: tidings.Hub,
) -> None:
    # A healthy channel has no health row to lock. Two recordings that both read "no row"
    # each wrote their own count over the other's, so the breaker missed an opening (or a
    # late one closed a breaker that had opened meanwhile, and it announced a second one).
    hook = await pg_hub.channels.create(name="hook", kind="inbox")
    ops = await pg_hub.channels.create(name="ops", kind="inbox", filter={"kinds": ["tidings.*"]})
    policy = Policy(failures=2)
    async with _second_hub(pg_hub) as other:
        async with _open_transaction(pg_hub) as run:
            assert not (await run(health.record, hook.id, False, 1, "HTTP 503", policy)).opened
            second = asyncio.create_task(
                other.store.record_health(hook.id, False, 1, "HTTP 503", policy)
            )
            await eventually(lambda: _waits_on_a_lock(pg_hub), what="the second one waiting")
        change = await second  # it went on once the first had committed

    assert change.opened
    breaker = (await pg_hub.store.breakers())[hook.id]
    assert (breaker.state, breaker.consecutive_failures) == (BreakerState.OPEN, 2)
    page = await pg_hub.deliveries(tidings.DeliveryQuery(channel_id=ops.id))
    assert [v.event_kind for v in page.items] == ["tidings.channel.breaker_opened"]


async def test_o7_an_outcome_written_again_while_the_first_commits_keeps_one_attempt_row(
    pg_hub: tidings.Hub,
) -> None:
    # A worker whose connection was cut writes its outcome again on a new one, while the
    # first write may still be committing. A check of the rows already stored reads the
    # statement's snapshot, from before that commit: both wrote the send's attempt row.
    ch = await channel(pg_hub, "hook")
    await publish(pg_hub, 2)
    got = await claim(pg_hub, ch)
    records = [attempt(i, AttemptStatus.DELIVERED) for i in got.ids]
    async with _second_hub(pg_hub) as other:
        async with _open_transaction(pg_hub) as run:
            assert await run(outcomes.mark_sent, got.token, got.ids, records) == 2
            again = asyncio.create_task(other.store.mark_sent(got.token, got.ids, records))
            await eventually(lambda: _waits_on_a_lock(pg_hub), what="the second write waiting")
        assert await again == 0  # the rows are sent already: nothing for it to change

    for delivery_id in got.ids:
        detail = await pg_hub.delivery(delivery_id)
        assert [a.status for a in detail.attempts_log] == [AttemptStatus.DELIVERED]


@contextlib.asynccontextmanager
async def _second_hub(hub: tidings.Hub) -> AsyncIterator[tidings.Hub]:
    """Another process's view of the same database: a hub with its own connections."""
    url = hub.store.url.render_as_string(hide_password=False).replace("+asyncpg", "")
    async with tidings.Hub(url) as other:
        yield other


@contextlib.asynccontextmanager
async def _open_transaction(
    hub: tidings.Hub,
) -> AsyncIterator[Callable[..., Awaitable[Any]]]:
    """Run store operations in one transaction that stays open (its locks held, its rows
    unseen by others) until the block ends, then commits."""
    store = hub.store
    async with store.engine.connect() as conn, conn.begin():

        async def run(op: Callable[..., Any], *args: Any) -> Any:
            def call(sync: Connection) -> Any:
                store.sealer.put_on(sync)
                return op(sync, TxClock(sync, None, store._clock), *args)

            return await conn.run_sync(call)

        yield run


async def _waits_on_a_lock(hub: tidings.Hub) -> bool:
    query = text(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    async with hub.store.engine.connect() as conn:
        return bool((await conn.execute(query)).scalar_one())
