"""The webhook workload on procrastinate, run inside bench/peers/.venv:

    python procrastinate_run.py --dsn DSN --sink URL --jobs N [--stats URL]

Applies procrastinate's schema, batch-defers N jobs, starts one worker process
(`App.run_worker_async`, on uvloop) and prints one JSON line with jobs/s.
"""

# The peer libraries live only in bench/peers/.venv, so `mypy --strict bench` run in tidings'
# environment cannot find them; in their own venv (see README.md) these files check clean.
# mypy: disable-error-code="import-not-found"

from __future__ import annotations

import logging
import sys
from importlib.metadata import version
from typing import Any

import harness
import procrastinate
import psycopg
from procrastinate import JobContext

DEFER_BATCH = 1000
# The worker's connection pool. psycopg_pool's default is a fixed 4 connections; each job is
# fetched and finished in transactions of its own, and a user tuning for throughput sizes the
# pool up. Measured: a maximum of 16 beat 4 and 50 (README.md).
POOL_MIN = 4
POOL_MAX = 16
FINAL = ("succeeded", "failed", "cancelled", "aborted")
# Note: the worker fetches jobs one at a time, each fetch a transaction awaited before the
# next, so with sub-millisecond POSTs only 1-2 jobs are ever in flight: concurrency=50 is an
# upper bound that this workload never reaches.


def make_app(dsn: str, pool_max: int | None = None) -> procrastinate.App:
    # procrastinate warns when the App lives in __main__, because task names would then
    # start with "__main__."; this one-file script names its task explicitly instead.
    logging.getLogger("procrastinate.blueprints").setLevel(logging.ERROR)
    connector = (
        procrastinate.PsycopgConnector(conninfo=dsn, min_size=POOL_MIN, max_size=pool_max)
        if pool_max
        else procrastinate.PsycopgConnector(conninfo=dsn)
    )
    return procrastinate.App(connector=connector)


async def deliver(context: JobContext, event: dict[str, Any]) -> None:
    extra = context.additional_context
    await harness.post(extra["http"], extra["sink"], harness.body(event))


def register(app: procrastinate.App) -> Any:
    # An explicit name: the driver and the worker both run this file as __main__, and the name
    # is what the job row refers to. No retry, the library's default.
    return app.task(name="webhook", pass_context=True)(deliver)


async def prepare(args: harness.Args) -> None:
    app = make_app(args.dsn)
    task = register(app)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        for start in range(0, args.jobs, DEFER_BATCH):
            stop = min(args.jobs, start + DEFER_BATCH)
            await task.batch_defer_async(*({"event": harness.event(i)} for i in range(start, stop)))


def states(conn: psycopg.Connection[Any]) -> dict[str, int]:
    rows = conn.execute("SELECT status::text, count(*) FROM procrastinate_jobs GROUP BY 1")
    return {str(status): int(count) for status, count in rows.fetchall()}


async def work(args: harness.Args) -> None:
    app = make_app(args.dsn, POOL_MAX)
    register(app)
    async with app.open_async(), harness.http_session() as http:
        harness.announce_ready()
        # wait=True: keep running until SIGTERM (the driver's stop), like a deployed worker;
        # procrastinate's own signal handlers turn it into a clean shutdown.
        await app.run_worker_async(
            concurrency=harness.CONCURRENCY,
            wait=True,
            additional_context={"http": http, "sink": args.sink},
        )


PEER = harness.Peer(
    name="procrastinate",
    version=version("procrastinate"),
    settings={
        "worker_processes": 1,
        "connector": f"PsycopgConnector (psycopg_pool, min {POOL_MIN} / max {POOL_MAX})",
        "concurrency": harness.CONCURRENCY,
        "listen_notify": True,
        "fetch_job_polling_interval_s": 5.0,
        "delete_jobs": "never (default)",
        "retry": "none (default: a failed job is marked 'failed')",
        "event_loop": "uvloop",
        "enqueue": f"Task.batch_defer_async, {DEFER_BATCH} jobs per call",
        "schema": "schema_manager.apply_schema_async()",
    },
    prepare=prepare,
    work=work,
    states=states,
    final=FINAL,
    succeeded="succeeded",
)

if __name__ == "__main__":
    sys.exit(harness.main(PEER))
