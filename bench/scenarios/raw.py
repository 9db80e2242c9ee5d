"""The `raw` baseline: a bare claim → POST → mark-batch loop (asyncpg + aiohttp + uvloop)
on a table of its own, the yardstick every throughput is given against."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from bench.result import Result
from bench.rig import Rig
from bench.workload import event

CREATE = (
    "CREATE TABLE raw_deliveries (id bigserial PRIMARY KEY, state text NOT NULL,"
    " attempts int NOT NULL DEFAULT 0, payload text NOT NULL, sent_at timestamptz)"
)
FILL = (
    "INSERT INTO raw_deliveries (state, payload) SELECT 'pending', $1 FROM generate_series(1, $2)"
)
# Claims of 100 rows, 50 POSTs in flight, and none of tidings' work per delivery (leases,
# rate limits, attempt rows, rendering): the loop every throughput is compared with.
CLAIM = (
    "WITH picked AS MATERIALIZED (SELECT id FROM raw_deliveries WHERE state='pending'"
    " ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED)"
    " UPDATE raw_deliveries r SET state='sending', attempts=r.attempts+1"
    " FROM picked WHERE r.id = picked.id RETURNING r.id, r.payload"
)
FINISH = "UPDATE raw_deliveries SET state='sent', sent_at=now() WHERE id = ANY($1::bigint[])"
IN_FLIGHT = 50

# The scenarios import aiohttp, asyncpg, uvloop and tidings where they use them, not at the
# top: the driver process runs raw itself, first of all, and every module loaded before then
# grows the heap its garbage collector walks while raw is timed.


async def _fill(conn: Any, n: int) -> None:
    await conn.execute(CREATE)
    payload = json.dumps({"type": "event", "event": event(0)})
    await conn.execute(FILL, payload, n)
    await conn.execute("ANALYZE raw_deliveries")


async def _send_all(conn: Any, sink_url: str) -> float:
    """Claim, POST and mark until no row is pending; the seconds it took."""
    import aiohttp

    claim = await conn.prepare(CLAIM)
    finish = await conn.prepare(FINISH)
    slots = asyncio.Semaphore(IN_FLIGHT)
    headers = {"content-type": "application/json"}
    connector = aiohttp.TCPConnector(limit=IN_FLIGHT)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def post(body: str) -> None:
            async with slots, http.post(sink_url, data=body.encode(), headers=headers) as r:
                await r.read()
                r.raise_for_status()

        started = time.perf_counter()
        while rows := await claim.fetch():
            await asyncio.gather(*(post(r["payload"]) for r in rows))
            await finish.fetch([r["id"] for r in rows])
        return time.perf_counter() - started


async def _raw(dsn: str, sink_url: str, n: int) -> float:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        await _fill(conn, n)
        elapsed = await _send_all(conn, sink_url)
        sent = await conn.fetchval("SELECT count(*) FROM raw_deliveries WHERE state='sent'")
        if sent != n:
            raise RuntimeError(f"raw: {sent} of {n} sent")
        return n / elapsed
    finally:
        await conn.close()


def raw_once(rig: Rig) -> float:
    """One run of the baseline loop on a fresh database (deliveries/s)."""
    import uvloop

    with rig.pg.database() as (_name, url):
        return uvloop.run(_raw(url, rig.sink.url("/hook"), rig.counts.raw))


def run(rig: Rig) -> list[Result]:
    before = rig.sink.stats()["count"]
    rate = raw_once(rig)
    received = rig.sink.stats()["count"] - before
    notes = {"rows": rig.counts.raw, "sink_received": received}
    return [Result("raw", rate, "deliveries/s", "postgresql", notes=notes)]
