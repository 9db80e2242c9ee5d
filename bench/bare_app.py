"""The bare baseline of HTTP ingest: a FastAPI app on the server stack `tidings serve` runs
(uvicorn with the same loop and parser choices), whose one route inserts an event row and a
delivery row in one transaction and commits: no auth, no validation, no fan-out rules.

    python -m bench.bare_app POSTGRES_URL PORT CHANNEL_ID

prints `ready` once it listens. The rows go into the tidings tables of a migrated database,
so both sides write the same rows with the same indexes.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import asyncpg
import uvicorn
import uvloop
from fastapi import FastAPI, Request, Response

EVENT = """INSERT INTO events (kind, subject, severity, title, body, labels, data, created_at)
VALUES ($1, $2, $3, $4, $5, '{}'::jsonb, $6::jsonb, now()) RETURNING id"""
DELIVERY = """INSERT INTO deliveries (event_id, channel_id, state, attempts, next_attempt_at,
created_at, message_id) VALUES ($1, $2, 'pending', 0, now(), now(), $3)"""


def create_app(pool: asyncpg.Pool, channel_id: int) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/events", status_code=201)
    async def publish(request: Request) -> Response:
        e: dict[str, Any] = await request.json()
        async with pool.acquire() as conn, conn.transaction():
            event_id = await conn.fetchval(
                EVENT,
                e["kind"],
                e["subject"],
                e["severity"],
                e["title"],
                e["body"],
                json.dumps(e.get("data", {})),
            )
            await conn.execute(DELIVERY, event_id, channel_id, os.urandom(12).hex())
        return Response(f'{{"id": {event_id}}}', 201, media_type="application/json")

    return app


async def serve(url: str, port: int, channel_id: int) -> None:
    # As many connections as tidings' own pool (bench: 10 + overflow), so neither side is
    # limited by connections the other has.
    async with asyncpg.create_pool(url, min_size=10, max_size=20) as pool:
        config = uvicorn.Config(
            create_app(pool, channel_id),
            host="127.0.0.1",
            port=port,
            lifespan="off",
            log_level="warning",
            access_log=False,
        )
        server = uvicorn.Server(config)
        started = asyncio.create_task(server.serve())
        while not server.started:
            if started.done():
                await started
                return
            await asyncio.sleep(0.01)
        print("ready", flush=True)
        await started


def main(argv: list[str]) -> int:
    url, port, channel_id = argv[0], int(argv[1]), int(argv[2])
    uvloop.run(serve(url, port, channel_id))  # as `tidings serve` runs (tidings.cli.app)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
