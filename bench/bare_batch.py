"""The bare baseline of batch publish: the benchmark's batches of 1,000 events and one
delivery row each, inserted in one transaction per batch with the fastest bare statements
asyncpg has — a multi-row insert from arrays (`unnest`), or COPY with ids drawn first — in a
process of its own, as bench/publish_batches.py measures tidings:

    python -m bench.bare_batch POSTGRES_URL BATCHES CHANNEL_ID

prints `method events/s` for each method.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import asyncpg

from bench.workload import event

Batch = list[dict[str, Any]]

EVENTS_FROM_ARRAYS = """INSERT INTO events (kind, subject, severity, title, body, labels, data,
created_at) SELECT k, s, v, t, b, '{}'::jsonb, d::jsonb, now()
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
AS u(k, s, v, t, b, d) RETURNING id"""
DELIVERIES_FROM_ARRAYS = """INSERT INTO deliveries (event_id, channel_id, state, attempts,
next_attempt_at, created_at, message_id) SELECT e, $2, 'pending', 0, now(), now(), m
FROM unnest($1::bigint[], $3::text[]) AS u(e, m)"""
EVENT_IDS = "SELECT nextval(pg_get_serial_sequence('events', 'id')) FROM generate_series(1, $1)"
EVENT_COLUMNS = ["id", "kind", "subject", "severity", "title", "body", "labels", "data"]
EVENT_COLUMNS += ["created_at"]
DELIVERY_COLUMNS = ["event_id", "channel_id", "state", "attempts", "next_attempt_at"]
DELIVERY_COLUMNS += ["created_at", "message_id"]


def _message_ids(n: int) -> list[str]:
    return [os.urandom(12).hex() for _ in range(n)]


async def by_arrays(conn: asyncpg.Connection, batch: Batch, channel_id: int) -> None:
    columns = [[e[k] for e in batch] for k in ("kind", "subject", "severity", "title", "body")]
    data = [json.dumps(e["data"]) for e in batch]
    async with conn.transaction():
        ids = [r[0] for r in await conn.fetch(EVENTS_FROM_ARRAYS, *columns, data)]
        await conn.execute(DELIVERIES_FROM_ARRAYS, ids, channel_id, _message_ids(len(ids)))


async def by_copy(conn: asyncpg.Connection, batch: Batch, channel_id: int) -> None:
    now = datetime.now(UTC)
    async with conn.transaction():
        ids = [r[0] for r in await conn.fetch(EVENT_IDS, len(batch))]
        records = [
            (i, e["kind"], e["subject"], e["severity"], e["title"], e["body"], "{}",
             json.dumps(e["data"]), now)
            for i, e in zip(ids, batch, strict=True)
        ]  # fmt: skip
        await conn.copy_records_to_table("events", records=records, columns=EVENT_COLUMNS)
        rows = [
            (i, channel_id, "pending", 0, now, now, m)
            for i, m in zip(ids, _message_ids(len(ids)), strict=True)
        ]
        await conn.copy_records_to_table("deliveries", records=rows, columns=DELIVERY_COLUMNS)


Method = Callable[[asyncpg.Connection, Batch, int], Awaitable[None]]
METHODS: dict[str, Method] = {"unnest": by_arrays, "copy": by_copy}


async def events_per_s(url: str, batches: int, channel_id: int, method: Method) -> float:
    conn = await asyncpg.connect(url)
    try:
        batch = [event(i) for i in range(1000)]
        await method(conn, batch, channel_id)  # warm-up (statements, caches)
        started = time.perf_counter()
        for _ in range(batches):
            # As tidings does from a caller's dicts: the batch is built per call.
            await method(conn, [dict(e) for e in batch], channel_id)
        return batches * len(batch) / (time.perf_counter() - started)
    finally:
        await conn.close()


def main(argv: list[str]) -> int:
    url, batches, channel_id = argv[0], int(argv[1]), int(argv[2])
    for name, method in METHODS.items():
        print(f"{name} {asyncio.run(events_per_s(url, batches, channel_id, method)):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
