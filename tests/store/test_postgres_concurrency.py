"""W1 on PostgreSQL: concurrent claimers never block on or double-claim each other."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Connection

import tidings
from tests.dispatch.helpers import eventually
from tests.store.helpers import LEASE_S
from tidings.core.breaker import BreakerState, Policy
from tidings.store import health
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
    store = pg_hub.store
    url = store.url.render_as_string(hide_password=False).replace("+asyncpg", "")
    async with tidings.Hub(url) as other:
        async with store.engine.connect() as conn, conn.begin():

            def first(sync: Connection) -> health.Change:
                store.sealer.put_on(sync)
                clock = TxClock(sync, None, store._clock)
                return health.record(sync, clock, hook.id, False, 1, "HTTP 503", policy)

            assert not (await conn.run_sync(first)).opened
            second = asyncio.create_task(
                other.store.record_health(hook.id, False, 1, "HTTP 503", policy)
            )
            await eventually(lambda: _waits_on_a_lock(pg_hub), what="the second one waiting")
        change = await second  # it goes on once the first has committed

    assert change.opened
    breaker = (await store.breakers())[hook.id]
    assert (breaker.state, breaker.consecutive_failures) == (BreakerState.OPEN, 2)
    page = await pg_hub.deliveries(tidings.DeliveryQuery(channel_id=ops.id))
    assert [v.event_kind for v in page.items] == ["tidings.channel.breaker_opened"]


async def _waits_on_a_lock(hub: tidings.Hub) -> bool:
    query = text(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    async with hub.store.engine.connect() as conn:
        return bool((await conn.execute(query)).scalar_one())
