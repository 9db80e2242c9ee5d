"""The webhook workload on pgqueuer, run inside bench/peers/.venv:

    python pgqueuer_run.py --dsn DSN --sink URL --jobs N [--stats URL]

Installs pgqueuer's schema, enqueues N jobs in batches, starts one worker process (the
programmatic form of `pgq run`, on uvloop) and prints one JSON line with jobs/s.
"""

# The peer libraries live only in bench/peers/.venv, so `mypy --strict bench` run in tidings'
# environment cannot find them; in their own venv (see README.md) these files check clean.
# mypy: disable-error-code="import-not-found"

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from importlib.metadata import version
from typing import Any, cast

import aiohttp
import asyncpg
import harness
import pgqueuer
import psycopg
from pgqueuer import Job, PgQueuer, Queries
from pgqueuer.models import Context

ENTRYPOINT = "webhook"
ENQUEUE_BATCH = 1000
# pgqueuer's worker knobs. max_concurrent_tasks is the per-process cap (tidings' concurrency);
# the dequeue batch must be at most half of it, so 25 is the largest allowed and needs the
# fewest dequeue round trips (10, the default, was slower). The entrypoint itself stays
# unlimited (concurrency_limit=0). Leaving max_concurrent_tasks unset is faster still (README.md),
# but then the worker picks the whole backlog at once and only the HTTP connector limits what
# is in flight, which is not the "50 at a time" that tidings is measured with.
BATCH_SIZE = 25
MAX_CONCURRENT_TASKS = harness.CONCURRENCY
# Completed jobs leave pgqueuer's queue table; their final status is in the log table.
FINAL = ("successful", "exception", "failed", "canceled", "deleted")


async def prepare(args: harness.Args) -> None:
    conn = await asyncpg.connect(args.dsn)
    try:
        queries = Queries(pgqueuer.AsyncpgDriver(conn))
        await queries.install()
        for start in range(0, args.jobs, ENQUEUE_BATCH):
            count = min(ENQUEUE_BATCH, args.jobs - start)
            payloads: list[bytes | None] = [
                harness.body(harness.event(i)) for i in range(start, start + count)
            ]
            await queries.enqueue([ENTRYPOINT] * count, payloads, [0] * count)
    finally:
        await conn.close()


def states(conn: psycopg.Connection[Any]) -> dict[str, int]:
    # Queued and running jobs are rows of the queue table; finished ones only appear in the log
    # (which also holds a 'queued' entry per job, left out here so nothing counts twice).
    rows = conn.execute(
        "SELECT status::text, count(*) FROM pgqueuer GROUP BY 1 UNION ALL "
        "SELECT status::text, count(*) FROM pgqueuer_log "
        "WHERE status NOT IN ('queued', 'picked') GROUP BY 1"
    ).fetchall()
    out: dict[str, int] = {}
    for status, count in rows:
        out[str(status)] = out.get(str(status), 0) + int(count)
    return out


async def deliver(job: Job, ctx: Context) -> None:
    http = cast(aiohttp.ClientSession, ctx.resources["http"])
    assert job.payload is not None  # every job is enqueued with a body
    await harness.post(http, str(ctx.resources["sink"]), job.payload)


async def work(args: harness.Args) -> None:
    @contextlib.asynccontextmanager
    async def factory() -> AsyncIterator[PgQueuer]:
        # One connection, as `pgq run` opens by default (pgqueuer serialises its queries on it);
        # an asyncpg pool (from_asyncpg_pool, 4 or 10 connections) was no faster here.
        conn = await asyncpg.connect(args.dsn)
        try:
            async with harness.http_session() as http:
                pgq = PgQueuer.from_asyncpg_connection(
                    conn, resources={"http": http, "sink": args.sink}
                )
                pgq.entrypoint(ENTRYPOINT, accepts_context=True)(deliver)
                harness.announce_ready()
                yield pgq
        finally:
            await conn.close()

    # pgqueuer.run installs SIGTERM/SIGINT handlers that stop the worker cleanly.
    await pgqueuer.run(
        factory,
        batch_size=BATCH_SIZE,
        max_concurrent_tasks=MAX_CONCURRENT_TASKS,
    )


PEER = harness.Peer(
    name="pgqueuer",
    version=version("pgqueuer"),
    settings={
        "worker_processes": 1,
        "driver": "AsyncpgDriver (one asyncpg connection)",
        "batch_size": BATCH_SIZE,
        "max_concurrent_tasks": MAX_CONCURRENT_TASKS,
        "entrypoint_concurrency_limit": 0,
        "event_loop": "uvloop",
        "enqueue": f"Queries.enqueue, {ENQUEUE_BATCH} jobs per call",
        "schema": "Queries.install() (durable tables)",
        "on_failure": "delete (default: a failed job is logged as 'exception')",
    },
    prepare=prepare,
    work=work,
    states=states,
    final=FINAL,
    succeeded="successful",
)

if __name__ == "__main__":
    sys.exit(harness.main(PEER))
