"""W1 on PostgreSQL: concurrent claimers never block on or double-claim each other."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sqlalchemy.engine import Connection

import tidings
from tests.store.helpers import LEASE_S

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
