"""The bare baseline of an idle publish → receipt: what the same hops cost without tidings.

A publisher inserts an event row and its delivery row in one statement that also NOTIFYs,
committed durably (as tidings' publish is). A worker process LISTENs; woken, it leases the
row in one UPDATE whose commit does not wait for the WAL flush (as tidings' express claim),
POSTs the event as JSON with one aiohttp session, then marks the row sent. No validation,
fan-out rules, fencing, audit rows, retries or rendering: only the round trips every such
system makes, on the tidings tables of a migrated database (the same rows and indexes).

    python -m bench.bare_pipeline worker POSTGRES_URL SINK_URL

prints `ready` once it listens; `publish_one` is the publisher's side.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import aiohttp
import asyncpg
import uvloop

NOTIFY_CHANNEL = "bench_bare_pipeline"
PUBLISH = f"""WITH event AS (
    INSERT INTO events (kind, subject, severity, title, body, labels, data, created_at)
    VALUES ($1, $2, $3, $4, $5, '{{}}'::jsonb, $6::jsonb, now()) RETURNING id
), delivery AS (
    INSERT INTO deliveries (event_id, channel_id, state, attempts, next_attempt_at,
        created_at, message_id)
    SELECT id, $7, 'pending', 0, now(), now(), $8 FROM event RETURNING id
)
SELECT pg_notify('{NOTIFY_CHANNEL}', '') FROM delivery"""
CLAIM = """UPDATE deliveries AS d
SET state = 'sending', attempts = d.attempts + 1, lease_owner = 'bare', lease_token = $1,
    next_attempt_at = now() + interval '2 minutes'
FROM events AS e
WHERE d.id IN (
    SELECT id FROM deliveries
    WHERE state = 'pending' AND next_attempt_at <= now()
    ORDER BY id LIMIT 10 FOR UPDATE SKIP LOCKED
) AND e.id = d.event_id
RETURNING d.id, e.kind, e.subject, e.severity, e.title, e.body, e.data"""
SENT = """UPDATE deliveries SET state = 'sent', sent_at = now(), lease_owner = NULL,
    lease_token = NULL WHERE id = ANY($1::bigint[])"""


async def publish_one(conn: asyncpg.Connection, channel_id: int, event: dict[str, Any]) -> None:
    """Store `event` (a `bench.workload.event`) and its delivery to `channel_id`, durably."""
    await conn.execute(
        PUBLISH,
        event["kind"],
        event["subject"],
        event["severity"],
        event["title"],
        event["body"],
        json.dumps(event["data"]),
        channel_id,
        os.urandom(12).hex(),
    )


async def work(url: str, sink_url: str) -> None:
    """Lease, POST and mark sent whatever is due, each time a publish wakes it."""
    claims = await asyncpg.connect(url)
    await claims.execute("SET synchronous_commit = off")
    marks = await asyncpg.connect(url)
    listening = await asyncpg.connect(url)
    woken = asyncio.Event()
    await listening.add_listener(NOTIFY_CHANNEL, lambda *_: woken.set())
    async with aiohttp.ClientSession() as http:
        print("ready", flush=True)
        while True:
            await woken.wait()
            woken.clear()
            while rows := await claims.fetch(CLAIM, os.urandom(16).hex()):
                for row in rows:
                    body = json.dumps({"event": {**row, "data": json.loads(row["data"])}})
                    headers = {"Content-Type": "application/json"}
                    async with http.post(sink_url, data=body, headers=headers) as answer:
                        await answer.read()
                await marks.execute(SENT, [row["id"] for row in rows])


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] != "worker":
        print("usage: python -m bench.bare_pipeline worker POSTGRES_URL SINK_URL", file=sys.stderr)
        return 2
    uvloop.run(work(argv[1], argv[2]))  # the loop `tidings worker` runs on
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
